#include "sim/report/html_charts.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace prefixsim {
namespace html {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr int kWidth = 640, kHeight = 360;
constexpr int kLeft = 78, kRight = 34, kTop = 44, kBottom = 52;

// Tableau-like palette, readable on white.
constexpr const char* kPalette[] = {"#4c78a8", "#f58518", "#54a24b", "#e45756",
                                    "#b279a2", "#72b7b2", "#9d755d", "#666666"};

struct Axis {
  double lo = 0, hi = 1;
  bool log = false;
  double base = 10;
  double px0 = 0, px1 = 1;  // pixel range
  double T(double v) const {
    if (log) {
      v = std::max(v, lo);
      const double a = std::log(lo), b = std::log(hi);
      return px0 + (std::log(v) - a) / (b - a) * (px1 - px0);
    }
    return px0 + (v - lo) / (hi - lo) * (px1 - px0);
  }
};

std::vector<double> LinearTicks(double lo, double hi) {
  const double range = hi - lo;
  const double raw = range / 5;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    step = m * mag;
    if (range / step <= 6.5) break;
  }
  std::vector<double> t;
  for (double v = std::ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9; v += step) {
    t.push_back(std::abs(v) < step * 1e-9 ? 0.0 : v);
  }
  return t;
}

std::vector<double> LogTicks(double lo, double hi, double base) {
  std::vector<double> t;
  if (base == 2) {
    for (double v = std::pow(2.0, std::ceil(std::log2(lo) - 1e-9)); v <= hi * (1 + 1e-9); v *= 2) {
      t.push_back(v);
    }
    while (t.size() > 9) {
      std::vector<double> half;
      for (size_t i = 0; i < t.size(); i += 2) half.push_back(t[i]);
      t.swap(half);
    }
    return t;
  }
  const bool sparse = std::log10(hi / lo) < 2.5;
  for (double d = std::pow(10.0, std::floor(std::log10(lo))); d <= hi * (1 + 1e-9); d *= 10) {
    for (double m : {1.0, 2.0, 5.0}) {
      if (m != 1.0 && !sparse) continue;
      const double v = d * m;
      if (v >= lo * (1 - 1e-9) && v <= hi * (1 + 1e-9)) t.push_back(v);
    }
  }
  return t;
}

std::string DefaultTick(double v) {
  const double a = std::abs(v);
  if (a == 0) return "0";
  if (a >= 100 || std::abs(v - std::round(v)) < 1e-9) return Number(v, 0);
  if (a >= 1) return Number(v, 1);
  return Number(v, a >= 0.1 ? 2 : 3);
}

// A series' CSS colour: its own, or the palette's.
std::string SeriesColor(const Series& s) {
  return s.css_color.empty() ? std::string(Color(s.color)) : s.css_color;
}

// Dark text on a light "#rrggbb" background, white on anything else.
const char* TextColorOn(const std::string& css) {
  if (css.size() != 7 || css[0] != '#') return "#fff";
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    const char lower = static_cast<char>(c | 0x20);
    return lower >= 'a' && lower <= 'f' ? lower - 'a' + 10 : -1;
  };
  int rgb[3];
  for (int i = 0; i < 3; ++i) {
    const int hi = hex(css[1 + 2 * i]), lo = hex(css[2 + 2 * i]);
    if (hi < 0 || lo < 0) return "#fff";
    rgb[i] = 16 * hi + lo;
  }
  const double luma = 0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2];
  return luma > 160 ? "#222" : "#fff";
}

// The <figure> and <svg> opening tags of a chart.
std::string OpenFigure(const ChartSpec& spec, int height = kHeight) {
  return absl::StrFormat(
      "<figure class=\"chart\" data-chart=\"%s\"><figcaption>%s</figcaption>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 %d %d\" width=\"%d\" "
      "height=\"%d\" role=\"img\" aria-label=\"%s\">\n",
      Escape(spec.id), Escape(spec.title), kWidth, height, kWidth, height, Escape(spec.title));
}

// Horizontal grid lines with their y tick labels.
void AppendYGrid(std::string* out, const Axis& ay, double ylo, double yhi,
                 const std::function<std::string(double)>& yfmt) {
  for (double t : LinearTicks(ylo, yhi)) {
    const double y = ay.T(t);
    absl::StrAppendFormat(out,
                          "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#e4e4e4\"/>"
                          "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n",
                          kLeft, kWidth - kRight, y, y, kLeft - 6, y + 4, Escape(yfmt(t)));
  }
}

// The two axis lines and the axis labels.
void AppendFrame(std::string* out, const ChartSpec& spec) {
  absl::StrAppendFormat(out,
                        "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"#555\"/>"
                        "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"#555\"/>\n",
                        kLeft, kWidth - kRight, kHeight - kBottom, kHeight - kBottom, kLeft, kLeft,
                        kTop, kHeight - kBottom);
  absl::StrAppendFormat(out,
                        "<text class=\"xlabel\" x=\"%d\" y=\"%d\" text-anchor=\"middle\" "
                        "font-size=\"13\">%s</text>\n",
                        (kLeft + kWidth - kRight) / 2, kHeight - 12, Escape(spec.x_label));
  absl::StrAppendFormat(out,
                        "<text class=\"ylabel\" transform=\"translate(18,%d) rotate(-90)\" "
                        "text-anchor=\"middle\" font-size=\"13\">%s</text>\n",
                        (kTop + kHeight - kBottom) / 2, Escape(spec.y_label));
}

// Legend: one row above the plot.
void AppendLegend(std::string* out, const ChartSpec& spec) {
  *out += "<g class=\"legend\" font-size=\"12\">\n";
  double lx = kLeft;
  for (const Series& s : spec.series) {
    absl::StrAppendFormat(out,
                          "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"16\" y2=\"16\" stroke=\"%s\" "
                          "stroke-width=\"3\"/><text x=\"%.1f\" y=\"20\">%s</text>\n",
                          lx, lx + 18, SeriesColor(s), lx + 23, Escape(s.name));
    lx += 40 + 7.0 * static_cast<double>(s.name.size());
  }
  *out += "</g>\n";
}

void AppendNoData(std::string* out) {
  absl::StrAppendFormat(out,
                        "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" fill=\"#888\">no "
                        "data</text>\n",
                        (kLeft + kWidth) / 2, (kTop + kHeight) / 2);
}

void CloseFigure(std::string* out, const ChartSpec& spec) {
  *out += "</svg>";
  if (!spec.note.empty()) absl::StrAppend(out, "<p class=\"note\">", spec.note, "</p>");
  *out += "</figure>\n";
}

}  // namespace

ChartSpec::ChartSpec() : x_min(kNaN), x_max(kNaN), y_min(kNaN), y_max(kNaN) {}

const char* Color(int i) {
  return kPalette[static_cast<size_t>(i) % (sizeof(kPalette) / sizeof(kPalette[0]))];
}

std::string Escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string Thousands(int64_t v) {
  const uint64_t u = v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  const std::string digits = std::to_string(u);
  std::string out;
  const int n = static_cast<int>(digits.size());
  for (int i = 0; i < n; ++i) {
    if (i > 0 && (n - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return v < 0 ? "-" + out : out;
}

std::string Number(double v, int decimals) {
  if (!std::isfinite(v)) return "n/a";
  const double scale = std::pow(10.0, decimals);
  double r = std::round(std::abs(v) * scale) / scale;
  const int64_t ip = static_cast<int64_t>(std::floor(r));
  std::string s = Thousands(ip);
  if (decimals > 0) {
    const int64_t frac = static_cast<int64_t>(std::llround((r - static_cast<double>(ip)) * scale));
    s += absl::StrFormat(".%0*d", decimals, frac);
  }
  const bool negative = v < 0 && r > 0;
  return negative ? "-" + s : s;
}

std::string Bytes(double v) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  while (std::abs(v) >= 1024 && u < 5) {
    v /= 1024;
    ++u;
  }
  const bool whole = std::abs(v - std::round(v)) < 1e-9;
  return absl::StrCat(Number(v, whole ? 0 : 1), " ", kUnits[u]);
}

Series CdfSeries(std::string name, std::vector<double> values, int color, size_t max_points) {
  Series s;
  s.name = std::move(name);
  s.color = color;
  s.step = true;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  if (n == 0) return s;
  // One point per distinct value (its cumulative fraction), thinned to max_points quantiles.
  std::vector<std::pair<double, double>> pts;
  for (size_t i = 0; i < n; ++i) {
    if (i + 1 < n && values[i + 1] == values[i]) continue;
    pts.emplace_back(values[i], static_cast<double>(i + 1) / static_cast<double>(n));
  }
  if (pts.size() > max_points) {
    std::vector<std::pair<double, double>> thin;
    const double stride = static_cast<double>(pts.size()) / static_cast<double>(max_points);
    for (double k = 0; k < static_cast<double>(pts.size()); k += stride) {
      thin.push_back(pts[static_cast<size_t>(k)]);
    }
    if (thin.back() != pts.back()) thin.push_back(pts.back());
    pts.swap(thin);
  }
  s.points = std::move(pts);
  return s;
}

std::string LineChart(const ChartSpec& spec) {
  std::string out = OpenFigure(spec);
  // Domain.
  double xlo = std::numeric_limits<double>::infinity(), xhi = -xlo;
  double ylo = xlo, yhi = -xlo;
  const bool log_x = spec.log_x || spec.log2_x;
  size_t num_points = 0;
  for (const Series& s : spec.series) {
    for (const auto& [x, y] : s.points) {
      if (log_x && x <= 0) continue;
      xlo = std::min(xlo, x);
      xhi = std::max(xhi, x);
      ylo = std::min(ylo, y);
      yhi = std::max(yhi, y);
      ++num_points;
    }
  }
  for (const Marker& m : spec.markers) {
    if (log_x && m.x <= 0) continue;
    xlo = std::min(xlo, m.x);
    xhi = std::max(xhi, m.x);
  }
  if (!std::isnan(spec.x_min)) xlo = spec.x_min;
  if (!std::isnan(spec.x_max)) xhi = spec.x_max;
  if (!std::isnan(spec.y_min)) ylo = spec.y_min;
  if (!std::isnan(spec.y_max)) yhi = spec.y_max;
  if (!std::isfinite(xlo) || !std::isfinite(xhi)) xlo = log_x ? 1 : 0, xhi = log_x ? 10 : 1;
  if (!std::isfinite(ylo) || !std::isfinite(yhi)) ylo = 0, yhi = 1;
  if (std::isnan(spec.y_min)) ylo = std::min(ylo, 0.0);
  if (std::isnan(spec.y_max)) yhi = yhi + 0.05 * (yhi - ylo);
  if (xhi <= xlo) {
    if (log_x) {
      xlo /= 2;
      xhi *= 2;
    } else {
      const double pad = xlo == 0 ? 1 : std::abs(xlo) * 0.1;
      xlo -= pad;
      xhi += pad;
    }
  }
  if (yhi <= ylo) yhi = ylo + 1;
  Axis ax{xlo, xhi, log_x, spec.log2_x ? 2.0 : 10.0, kLeft, kWidth - kRight};
  Axis ay{ylo, yhi, false, 10, kHeight - kBottom, kTop};
  auto xfmt = spec.x_tick ? spec.x_tick : DefaultTick;
  auto yfmt = spec.y_tick ? spec.y_tick : DefaultTick;

  // Grid, ticks and axes.
  out += "<g class=\"axes\" font-size=\"12\" fill=\"#333\">\n";
  AppendYGrid(&out, ay, ylo, yhi, yfmt);
  const std::vector<double> xt =
      log_x ? LogTicks(xlo, xhi, spec.log2_x ? 2.0 : 10.0) : LinearTicks(xlo, xhi);
  for (double t : xt) {
    const double x = ax.T(t);
    absl::StrAppendFormat(&out,
                          "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" stroke=\"#eeeeee\"/>"
                          "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n",
                          x, x, kTop, kHeight - kBottom + 5, x, kHeight - kBottom + 18,
                          Escape(xfmt(t)));
  }
  AppendFrame(&out, spec);
  out += "</g>\n";
  AppendLegend(&out, spec);

  // Data.
  absl::StrAppendFormat(&out,
                        "<clipPath id=\"clip-%s\"><rect x=\"%d\" y=\"%d\" width=\"%d\" "
                        "height=\"%d\"/></clipPath>\n<g clip-path=\"url(#clip-%s)\">\n",
                        Escape(spec.id), kLeft, kTop - 2, kWidth - kLeft - kRight + 2,
                        kHeight - kTop - kBottom + 4, Escape(spec.id));
  for (const Series& s : spec.series) {
    std::string d;
    bool first = true;
    double prev_y = ay.T(std::max(ylo, 0.0));
    for (const auto& [x, y] : s.points) {
      if (log_x && x <= 0) continue;
      const double px = ax.T(x), py = ay.T(y);
      if (first) {
        if (s.step) {
          absl::StrAppendFormat(&d, "M%.1f %.1fV%.1f", px, prev_y, py);
        } else {
          absl::StrAppendFormat(&d, "M%.1f %.1f", px, py);
        }
        first = false;
      } else if (s.step) {
        absl::StrAppendFormat(&d, "H%.1fV%.1f", px, py);
      } else {
        absl::StrAppendFormat(&d, "L%.1f %.1f", px, py);
      }
      prev_y = py;
    }
    if (s.step && !first) absl::StrAppendFormat(&d, "H%d", kWidth - kRight);
    if (!d.empty()) {
      absl::StrAppendFormat(&out,
                            "<path class=\"mark\" d=\"%s\" fill=\"none\" stroke=\"%s\" "
                            "stroke-width=\"2\"><title>%s</title></path>\n",
                            d, SeriesColor(s), Escape(s.name));
    }
    if (s.dots || s.points.size() == 1) {
      for (const auto& [x, y] : s.points) {
        if (log_x && x <= 0) continue;
        absl::StrAppendFormat(&out,
                              "<circle class=\"mark\" cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" "
                              "fill=\"%s\"><title>%s: (%s, %s)</title></circle>\n",
                              ax.T(x), ay.T(y), SeriesColor(s), Escape(s.name), Escape(xfmt(x)),
                              Escape(yfmt(y)));
      }
    }
  }
  out += "</g>\n";
  // Markers: dashed verticals with a label near the top, staggered.
  for (size_t i = 0; i < spec.markers.size(); ++i) {
    const Marker& m = spec.markers[i];
    if (log_x && m.x <= 0) continue;
    const double x = ax.T(m.x);
    const bool right = x > kWidth * 0.7;
    absl::StrAppendFormat(&out,
                          "<line class=\"mark marker\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" "
                          "stroke=\"%s\" stroke-dasharray=\"5 4\" stroke-width=\"1.5\"/>"
                          "<text x=\"%.1f\" y=\"%d\" font-size=\"12\" fill=\"%s\" "
                          "text-anchor=\"%s\">%s</text>\n",
                          x, x, kTop, kHeight - kBottom, Color(m.color), right ? x - 4 : x + 4,
                          kTop + 14 + 15 * static_cast<int>(i), Color(m.color),
                          right ? "end" : "start", Escape(m.label));
  }
  if (num_points == 0) AppendNoData(&out);
  CloseFigure(&out, spec);
  return out;
}

std::string BarChart(const ChartSpec& spec) {
  std::string out = OpenFigure(spec);
  // Categories 0..n-1 from the series' x values; bars of one category side by side.
  int categories = 0;
  double ylo = 0, yhi = 0;
  size_t num_points = 0;
  for (const Series& s : spec.series) {
    for (const auto& [x, y] : s.points) {
      if (x < 0) continue;
      categories = std::max(categories, static_cast<int>(std::lround(x)) + 1);
      ylo = std::min(ylo, y);
      yhi = std::max(yhi, y);
      ++num_points;
    }
  }
  if (!std::isnan(spec.y_min)) ylo = spec.y_min;
  if (!std::isnan(spec.y_max)) {
    yhi = spec.y_max;
  } else {
    yhi += 0.05 * (yhi - ylo);
  }
  if (yhi <= ylo) yhi = ylo + 1;
  Axis ay{ylo, yhi, false, 10, kHeight - kBottom, kTop};
  auto xfmt = spec.x_tick ? spec.x_tick : DefaultTick;
  auto yfmt = spec.y_tick ? spec.y_tick : DefaultTick;
  const double band =
      static_cast<double>(kWidth - kRight - kLeft) / static_cast<double>(std::max(1, categories));
  // Category labels thinned to at most ~16, so that a large fleet stays readable.
  const int label_every = std::max(1, (categories + 15) / 16);

  out += "<g class=\"axes\" font-size=\"12\" fill=\"#333\">\n";
  AppendYGrid(&out, ay, ylo, yhi, yfmt);
  for (int c = 0; c < categories; c += label_every) {
    absl::StrAppendFormat(&out, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n",
                          kLeft + (c + 0.5) * band, kHeight - kBottom + 18,
                          Escape(xfmt(static_cast<double>(c))));
  }
  AppendFrame(&out, spec);
  out += "</g>\n";
  AppendLegend(&out, spec);

  // Each category's band: 80% bars (one slot per series), 20% gap.
  const double slot = 0.8 * band / static_cast<double>(std::max<size_t>(1, spec.series.size()));
  const double zero = ay.T(std::clamp(0.0, ylo, yhi));
  out += "<g>\n";
  for (size_t i = 0; i < spec.series.size(); ++i) {
    const Series& s = spec.series[i];
    for (const auto& [x, y] : s.points) {
      if (x < 0) continue;
      const double left =
          kLeft + std::lround(x) * band + 0.1 * band + static_cast<double>(i) * slot;
      const double top = ay.T(std::clamp(y, ylo, yhi));
      absl::StrAppendFormat(&out,
                            "<rect class=\"mark\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                            "height=\"%.1f\" fill=\"%s\"><title>%s, %s: %s</title></rect>\n",
                            left, std::min(top, zero), std::max(0.5, slot - 1),
                            std::abs(zero - top), SeriesColor(s), Escape(s.name), Escape(xfmt(x)),
                            Escape(yfmt(y)));
    }
  }
  out += "</g>\n";
  if (num_points == 0) AppendNoData(&out);
  CloseFigure(&out, spec);
  return out;
}

std::string StackedShareBarChart(const ChartSpec& spec) {
  // Bars from the series' points: totals per category, then the layout.
  int categories = 0;
  for (const Series& s : spec.series) {
    for (const auto& [x, y] : s.points) {
      if (x >= 0) categories = std::max(categories, static_cast<int>(std::lround(x)) + 1);
    }
  }
  std::vector<double> total(static_cast<size_t>(categories), 0.0);
  size_t num_segments = 0;
  for (const Series& s : spec.series) {
    for (const auto& [x, y] : s.points) {
      if (x < 0 || !(y > 0)) continue;
      total[static_cast<size_t>(std::lround(x))] += y;
      ++num_segments;
    }
  }
  auto xfmt = spec.x_tick ? spec.x_tick : DefaultTick;
  auto yfmt = spec.y_tick ? spec.y_tick : DefaultTick;
  std::vector<std::string> labels;
  size_t longest = 0;
  for (int c = 0; c < categories; ++c) {
    labels.push_back(xfmt(static_cast<double>(c)));
    longest = std::max(longest, labels.back().size());
  }
  // The legend wraps into rows above the bars; the bars' labels sit in a left margin wide enough
  // for the longest (about 7 px a character at 12 px).
  struct Item {
    double x;
    int row;
  };
  std::vector<Item> items;
  double lx = kLeft;
  int rows = spec.series.empty() ? 0 : 1;
  for (const Series& s : spec.series) {
    const double w = 30 + 7.0 * static_cast<double>(s.name.size());
    if (lx + w > kWidth - kRight && lx > kLeft) {
      lx = kLeft;
      ++rows;
    }
    items.push_back({lx, rows - 1});
    lx += w;
  }
  const double left =
      std::clamp(16.0 + 7.0 * static_cast<double>(longest), static_cast<double>(kLeft), 260.0);
  const double right = kWidth - kRight;
  constexpr int kBar = 26, kGap = 12, kRow = 18;
  const int top = 10 + kRow * rows + 16;
  const int plot_height = std::max(1, categories) * (kBar + kGap) + kGap;
  const int height = top + plot_height + kBottom;
  const double plot_width = right - left;
  auto px = [&](double share) { return left + share / 100.0 * plot_width; };

  std::string out = OpenFigure(spec, height);
  // Vertical grid lines at every 20%, the frame and the axis label.
  out += "<g class=\"axes\" font-size=\"12\" fill=\"#333\">\n";
  for (int t = 0; t <= 100; t += 20) {
    absl::StrAppendFormat(&out,
                          "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" stroke=\"#e4e4e4\"/>"
                          "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%d</text>\n",
                          px(t), px(t), top, top + plot_height, px(t), top + plot_height + 18, t);
  }
  for (int c = 0; c < categories; ++c) {
    absl::StrAppendFormat(&out, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"end\">%s</text>\n",
                          left - 8, top + kGap + c * (kBar + kGap) + kBar / 2 + 4,
                          Escape(labels[static_cast<size_t>(c)]));
  }
  absl::StrAppendFormat(&out,
                        "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" stroke=\"#555\"/>"
                        "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" stroke=\"#555\"/>\n",
                        left, right, top + plot_height, top + plot_height, left, left, top,
                        top + plot_height);
  absl::StrAppendFormat(&out,
                        "<text class=\"xlabel\" x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" "
                        "font-size=\"13\">%s</text>\n",
                        (left + right) / 2, height - 12, Escape(spec.x_label));
  out += "</g>\n<g class=\"legend\" font-size=\"12\">\n";
  for (size_t i = 0; i < spec.series.size(); ++i) {
    const double y = 10 + kRow * items[i].row;
    absl::StrAppendFormat(&out,
                          "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" rx=\"2\" "
                          "fill=\"%s\"/><text x=\"%.1f\" y=\"%.1f\">%s</text>\n",
                          items[i].x, y, SeriesColor(spec.series[i]), items[i].x + 17, y + 10,
                          Escape(spec.series[i].name));
  }
  out += "</g>\n<g font-size=\"11\">\n";
  // The segments, left to right in series order.
  std::vector<double> filled(static_cast<size_t>(categories), 0.0);
  for (const Series& s : spec.series) {
    const std::string color = SeriesColor(s);
    for (const auto& [x, y] : s.points) {
      if (x < 0 || !(y > 0)) continue;
      const int c = static_cast<int>(std::lround(x));
      const double share = 100.0 * y / total[static_cast<size_t>(c)];
      const double x0 = px(filled[static_cast<size_t>(c)]);
      filled[static_cast<size_t>(c)] += share;
      const double x1 = px(std::min(100.0, filled[static_cast<size_t>(c)]));
      const int y0 = top + kGap + c * (kBar + kGap);
      absl::StrAppendFormat(
          &out,
          "<rect class=\"mark\" data-series=\"%s\" data-category=\"%d\" data-value=\"%.15g\" "
          "x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\"><title>%s &middot; %s: "
          "%s (%s%%)</title></rect>\n",
          Escape(s.name), c, y, x0, y0, std::max(0.5, x1 - x0), kBar, color,
          Escape(labels[static_cast<size_t>(c)]), Escape(s.name), Escape(yfmt(y)),
          Number(share, 2));
      if (x1 - x0 >= 40) {
        absl::StrAppendFormat(&out,
                              "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" fill=\"%s\" "
                              "pointer-events=\"none\">%s%%</text>\n",
                              (x0 + x1) / 2, y0 + kBar / 2 + 4, TextColorOn(color),
                              Number(share, 1));
      }
    }
  }
  for (int c = 0; c < categories; ++c) {
    if (total[static_cast<size_t>(c)] > 0) continue;
    absl::StrAppendFormat(&out, "<text x=\"%.1f\" y=\"%d\" fill=\"#888\">none</text>\n", left + 6,
                          top + kGap + c * (kBar + kGap) + kBar / 2 + 4);
  }
  out += "</g>\n";
  if (num_segments == 0) {
    absl::StrAppendFormat(&out,
                          "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" fill=\"#888\">no "
                          "data</text>\n",
                          (left + right) / 2, top + plot_height / 2 + 4);
  }
  CloseFigure(&out, spec);
  return out;
}

}  // namespace html
}  // namespace prefixsim
