// metrics.jsonl -> plot panels: field lookup by dotted path, default field discovery,
// per-series point collection sorted by x.
#include "base/metrics_plot.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "base/error.h"
#include "base/jsonl.h"

namespace moerl {
namespace {

// The value at `path`: a literal key first ("eval.reward" as one key), then nested objects.
const nlohmann::json* lookup(const nlohmann::json& row, const std::string& path) {
  if (!row.is_object()) return nullptr;
  auto it = row.find(path);
  if (it != row.end()) return &*it;
  const nlohmann::json* cur = &row;
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t dot = path.find('.', pos);
    std::string key = path.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
    if (!cur->is_object()) return nullptr;
    auto f = cur->find(key);
    if (f == cur->end()) return nullptr;
    cur = &*f;
    if (dot == std::string::npos) return cur;
    pos = dot + 1;
  }
  return nullptr;
}

bool is_number(const nlohmann::json* v) { return v != nullptr && v->is_number(); }

void collect(const nlohmann::json& v, const std::string& prefix, std::vector<std::string>& out,
             std::set<std::string>& seen) {
  if (v.is_object()) {
    for (auto it = v.begin(); it != v.end(); ++it) {
      collect(it.value(), prefix.empty() ? it.key() : prefix + "." + it.key(), out, seen);
    }
  } else if (v.is_number() && !prefix.empty() && seen.insert(prefix).second) {
    out.push_back(prefix);
  }
}

std::string join(const std::vector<std::string>& v, size_t max_items) {
  std::string s;
  for (size_t i = 0; i < v.size() && i < max_items; ++i) s += (i ? ", " : "") + v[i];
  if (v.size() > max_items) s += ", ...";
  return s.empty() ? "(none)" : s;
}

std::string trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

}  // namespace

std::vector<std::string> numeric_fields(const std::vector<nlohmann::json>& rows) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const auto& r : rows) collect(r, "", out, seen);
  return out;
}

std::vector<PlotPanel> metrics_panels(const std::vector<nlohmann::json>& rows,
                                      const MetricsPlotSpec& spec) {
  const std::vector<std::string> fields = numeric_fields(rows);
  const bool by_line = spec.x == "line";
  if (rows.empty()) {
    throw Error("metrics: no rows to plot", "the JSONL file is empty; plot after at least one step");
  }

  // x per row; rows without a numeric x are left out of every series.
  std::vector<double> xs(rows.size(), NAN);
  size_t num_x = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const nlohmann::json* v = by_line ? nullptr : lookup(rows[i], spec.x);
    if (by_line) {
      xs[i] = static_cast<double>(i + 1);
    } else if (is_number(v)) {
      xs[i] = v->get<double>();
    } else {
      continue;
    }
    ++num_x;
  }
  if (num_x == 0) {
    throw Error("metrics: no row has a numeric x field '" + spec.x + "'",
                "choose --x from: " + join(fields, 20) + " (or --x line for the line number)");
  }

  std::vector<std::string> groups = spec.panels;
  if (groups.empty()) {
    for (const auto& f : fields) {
      if (f != spec.x && groups.size() < spec.max_default_panels) groups.push_back(f);
    }
    if (groups.empty()) {
      throw Error("metrics: no numeric field besides x '" + spec.x + "' to plot",
                  "write numeric values per step, e.g. {\"step\": 1, \"reward\": 0.5}");
    }
  }

  std::vector<PlotPanel> panels;
  for (const std::string& group : groups) {
    PlotPanel panel;
    panel.x_label = by_line ? "line" : spec.x;
    size_t start = 0;
    while (start <= group.size()) {
      size_t plus = group.find('+', start);
      std::string field = trim(group.substr(start, plus == std::string::npos ? std::string::npos : plus - start));
      start = plus == std::string::npos ? group.size() + 1 : plus + 1;
      if (field.empty()) {
        throw Error("metrics: panel '" + group + "' has an empty field name",
                    "write panels as FIELD or FIELD+FIELD, e.g. reward+eval.reward");
      }
      std::vector<std::pair<double, double>> pts;
      size_t num_numeric = 0;
      for (size_t i = 0; i < rows.size(); ++i) {
        if (std::isnan(xs[i])) continue;
        const nlohmann::json* v = lookup(rows[i], field);
        if (is_number(v)) {
          pts.emplace_back(xs[i], v->get<double>());
          ++num_numeric;
        } else if (v != nullptr && v->is_null()) {
          pts.emplace_back(xs[i], NAN);  // NaN/Inf were written as null: break the line
        }
      }
      if (num_numeric == 0) {
        throw Error("metrics: no row has a numeric field '" + field + "'",
                    "numeric fields in this file: " + join(fields, 30));
      }
      std::stable_sort(pts.begin(), pts.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      PlotSeries s;
      s.name = field;
      for (const auto& [x, y] : pts) {
        s.xs.push_back(x);
        s.ys.push_back(y);
      }
      panel.title += (panel.title.empty() ? "" : " + ") + field;
      panel.series.push_back(std::move(s));
    }
    panels.push_back(std::move(panel));
  }
  return panels;
}

size_t plot_metrics_jsonl(const std::string& jsonl_path, const std::string& out_path,
                          const MetricsPlotSpec& spec) {
  plot_format_of(out_path);  // a bad extension fails before the file is read
  std::vector<PlotPanel> panels = metrics_panels(metrics::read_jsonl(jsonl_path), spec);
  PlotOptions options;
  options.title = spec.title;
  int height = spec.height;
  if (height <= 0) {
    height = 440 * plot_grid(static_cast<int>(panels.size())).second + (spec.title.empty() ? 0 : 30);
  }
  write_plots(out_path, panels, spec.width, height, options);
  return panels.size();
}

}  // namespace moerl
