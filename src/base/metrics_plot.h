// Plots of a metrics.jsonl file (one JSON object per step): picks fields by name (dotted
// paths reach into nested objects), one panel per field or per "a+b" group, x from a field
// (default "step") or the line number. Used by `moerl plot` and the trainer's end-of-run plot.
//
//   MetricsPlotSpec spec;
//   spec.panels = {"reward+eval.reward", "loss"};
//   plot_metrics_jsonl(run_dir + "/metrics.jsonl", run_dir + "/plot.png", spec);  // or .svg
//
// Rows without a field are skipped for that series (so sparse fields such as periodic
// eval results still draw as one line); a null value (NaN/Inf written by JsonlWriter)
// breaks the line. Thread-safety: pure functions apart from the file I/O.
// Failure: a field that no row holds as a number, or an x field missing from every row,
// throws moerl::Error naming the field and listing the numeric fields that do exist.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/plot.h"

namespace moerl {

struct MetricsPlotSpec {
  std::string x = "step";           // x field; "line" = 1-based line number
  std::vector<std::string> panels;  // "reward", "reward+eval.reward"; empty: every numeric field
  int width = 1200;
  int height = 0;                   // 0: 440 pixels per row of panels
  std::string title;                // optional figure title
  size_t max_default_panels = 12;   // cap when panels is empty
};

// Numeric leaves of the rows as dotted paths, in order of first appearance.
std::vector<std::string> numeric_fields(const std::vector<nlohmann::json>& rows);

std::vector<PlotPanel> metrics_panels(const std::vector<nlohmann::json>& rows,
                                      const MetricsPlotSpec& spec);

// Reads `jsonl_path`, writes `out_path` (PNG or SVG by its extension); returns the number of
// panels drawn.
size_t plot_metrics_jsonl(const std::string& jsonl_path, const std::string& out_path,
                          const MetricsPlotSpec& spec);

}  // namespace moerl
