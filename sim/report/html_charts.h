// Small inline-SVG chart helper for the HTML reports (html_report.cc): line, step, bar and stacked
// share bar charts with axes, ticks, units, a legend and vertical markers. No scripts, no network.
// Every drawn data element carries class "mark" so that a test (or the page's own check) can count
// them.
#ifndef PREFIXSIM_SIM_REPORT_HTML_CHARTS_H_
#define PREFIXSIM_SIM_REPORT_HTML_CHARTS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace prefixsim {
namespace html {

// "&", "<", ">", '"' escaped.
std::string Escape(std::string_view s);
// 1234567 -> "1,234,567".
std::string Thousands(int64_t v);
// A number with `decimals` decimals and thousands separators in the integer part.
std::string Number(double v, int decimals);
// Bytes in binary units: "64 GiB", "1.5 TiB", "512 MiB".
std::string Bytes(double v);

struct Series {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y), drawn in order
  int color = 0;                                  // palette index
  std::string css_color;                          // a CSS colour instead of the palette's
  bool step = false;                              // a step function (CDFs): horizontal then up
  bool dots = false;                              // also a dot at every point
};

struct Marker {
  double x = 0;
  std::string label;
  int color = 0;
};

struct ChartSpec {
  std::string id;  // data-chart attribute
  std::string title;
  std::string x_label;  // with the unit, e.g. "arrival time (s)"
  std::string y_label;
  bool log_x = false;  // base 10 (base 2 with log2_x)
  bool log2_x = false;
  // Axis ranges; NaN = from the data.
  double x_min, x_max, y_min, y_max;
  std::function<std::string(double)> x_tick;  // tick label format; default: Number
  std::function<std::string(double)> y_tick;
  std::vector<Series> series;
  std::vector<Marker> markers;
  std::string note;  // small text under the chart
  ChartSpec();
};

// A <figure class="chart"> holding the SVG. A chart with no points says so in its body.
std::string LineChart(const ChartSpec& spec);

// A grouped bar chart on the same frame: category c (an integer from 0) is a series' point with
// x = c, and each category holds one bar per series, side by side, from 0 to y. spec.x_tick labels
// the categories (default: the number); log axes and markers are ignored.
std::string BarChart(const ChartSpec& spec);

// Horizontal stacked bars of shares: category c (an integer from 0, a series' point with x = c)
// is one bar, labelled on its left by spec.x_tick (default: the number), split into one segment
// per series with y > 0, in series order, each as wide as its share of the category's total (the
// x axis runs from 0 to 100%). A segment's tooltip gives the category, the series, its value
// (spec.y_tick) and its share, and a segment wide enough shows its share; segments carry
// data-series, data-category and data-value (the y, "%.15g"). The legend lists every series and
// wraps; the height follows the number of bars. Log axes, markers and ranges are ignored.
std::string StackedShareBarChart(const ChartSpec& spec);

// The empirical CDF of `values` as a step series (at most ~max_points points).
Series CdfSeries(std::string name, std::vector<double> values, int color, size_t max_points = 400);

// The palette's CSS colour for index i.
const char* Color(int i);

}  // namespace html
}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_REPORT_HTML_CHARTS_H_
