// Axis ticks of the line charts (base/plot.h): "nice" steps (1, 2, 2.5 or 5 times a power
// of ten) and their labels with one SI-style suffix per axis.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "base/plot.h"

namespace moerl {
namespace {

// Among 1, 2, 2.5 and 5 times a power of ten, the step whose tick count inside [lo, hi]
// is closest to `target`; fewer than 3 ticks and the less readable 2.5 are penalized, and
// ties take the smaller step.
double nice_step(double lo, double hi, int target) {
  target = std::max(2, target);
  double raw = (hi - lo) / target;
  double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double best = mag, best_score = INFINITY;
  for (double decade : {mag / 10, mag, mag * 10}) {
    for (double m : {1.0, 2.0, 2.5, 5.0}) {
      double step = m * decade;
      double count = std::floor(hi / step + 1e-9) - std::ceil(lo / step - 1e-9) + 1;
      double score = std::fabs(count - target) + (count < 3 ? 10 : 0) + (m == 2.5 ? 1.01 : 0);
      if (score < best_score) {
        best_score = score;
        best = step;
      }
    }
  }
  return best;
}

}  // namespace

std::vector<double> nice_ticks(double lo, double hi, int target) {
  std::vector<double> ticks;
  if (!std::isfinite(lo) || !std::isfinite(hi) || !(hi > lo)) return ticks;
  double step = nice_step(lo, hi, target);
  double first = std::ceil(lo / step - 1e-9) * step;
  for (int i = 0;; ++i) {
    double v = first + i * step;
    if (v > hi + 1e-9 * step || i > 1000) break;
    if (std::fabs(v) < 1e-12 * step) v = 0;  // no "-0"
    ticks.push_back(v);
  }
  return ticks;
}

std::vector<std::string> format_ticks(const std::vector<double>& ticks) {
  std::vector<std::string> out;
  double amax = 0;
  for (double v : ticks) amax = std::max(amax, std::fabs(v));
  double step = ticks.size() > 1 ? std::fabs(ticks[1] - ticks[0]) : 0;
  // One suffix per axis, from the largest label.
  double scale = 1;
  std::string suffix;
  if (amax >= 1e9) {
    scale = 1e9, suffix = "G";
  } else if (amax >= 1e6) {
    scale = 1e6, suffix = "M";
  } else if (amax >= 1e4) {
    scale = 1e3, suffix = "k";
  } else if (amax > 0 && amax < 1e-2) {  // 3.0e-4 rather than 0.00030
    int e = static_cast<int>(std::floor(std::log10(amax)));
    scale = std::pow(10.0, e), suffix = "e" + std::to_string(e);
  }
  // Fewest decimals that show the step exactly (2.5 needs one more than 5).
  int decimals = 0;
  if (step > 0) {
    double q = step / scale;
    while (decimals < 12) {
      double t = q * std::pow(10.0, decimals);
      if (std::fabs(t - std::round(t)) < 1e-6 * std::max(1.0, t)) break;
      ++decimals;
    }
  }
  char buf[48];
  for (double v : ticks) {
    if (step > 0 && std::fabs(v) < 1e-9 * step) {
      out.push_back("0");
    } else if (step <= 0 || decimals > 6 || amax >= 1e15) {
      std::snprintf(buf, sizeof(buf), "%.3g", v);
      out.push_back(buf);
    } else {
      std::snprintf(buf, sizeof(buf), "%.*f%s", decimals, v / scale, suffix.c_str());
      out.push_back(buf);
    }
  }
  return out;
}

}  // namespace moerl
