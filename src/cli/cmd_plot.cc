// `moerl plot METRICS.jsonl --out plot.png|plot.svg [--x step] [--y reward,loss]`: line charts
// of chosen fields of a metrics.jsonl (logic in base/metrics_plot, drawn by cairo).
#include <cstdio>
#include <string>

#include "base/error.h"
#include "base/metrics_plot.h"
#include "cli/command.h"

namespace moerl::cli {
namespace {

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    std::string part = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!part.empty()) out.push_back(part);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

int run_plot(Args& args) {
  if (args.flag("--help") || args.flag("-h")) {
    std::printf(
        "usage: moerl plot METRICS.jsonl [--out plot.png|plot.svg] [--x step] [--y reward,loss]\n"
        "                  [--width 1200] [--height 0] [--title TEXT]\n"
        "  --y      comma-separated panels; join fields with '+' to share a panel\n"
        "           (reward+eval.reward); dotted names reach nested objects.\n"
        "           Default: every numeric field (up to 12).\n"
        "  --x      x-axis field (default step); 'line' plots against the line number.\n"
        "  --out    PNG or SVG by the extension; default: plot.png beside METRICS.jsonl.\n"
        "  --height 0 picks 440 pixels per row of panels.\n");
    return 0;
  }
  MetricsPlotSpec spec;
  std::string out = args.value_or("--out", "");
  spec.x = args.value_or("--x", spec.x);
  if (auto y = args.value("--y")) {
    spec.panels = split_commas(*y);
    if (spec.panels.empty()) {
      throw Error("--y '" + *y + "' names no fields", "e.g. --y reward,loss or --y reward+eval.reward");
    }
  }
  spec.width = static_cast<int>(args.integer("--width", spec.width));
  spec.height = static_cast<int>(args.integer("--height", spec.height));
  spec.title = args.value_or("--title", "");
  std::string in = args.positional(0, "METRICS.jsonl");
  args.finish();
  if (out.empty()) {
    size_t slash = in.find_last_of('/');
    out = (slash == std::string::npos ? std::string() : in.substr(0, slash + 1)) + "plot.png";
  }
  size_t n = plot_metrics_jsonl(in, out, spec);
  std::printf("wrote %s (%zu panel%s)\n", out.c_str(), n, n == 1 ? "" : "s");
  return 0;
}

}  // namespace

MOERL_COMMAND("plot", "PNG or SVG line charts of fields of a metrics.jsonl", run_plot);

}  // namespace moerl::cli
