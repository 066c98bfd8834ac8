// Needle-in-a-haystack heatmaps as PNG images: for each panel (a model, a setting) a grid of
// context length (columns) x needle depth (rows), each cell colored by its retrieval accuracy
// from red (0) through yellow to green (1) and labelled with its percent, plus a color bar.
// Drawing is integer pixel arithmetic with the font of model/png.h, so the same results give
// the same bytes on every machine.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "layers/common.h"
#include "model/png.h"

struct HeatmapPanel {
    std::string title;
    std::vector<std::string> cols, rows;
    std::vector<double> cells;  // rows.size() x cols.size(), row-major; NaN = no data
};

// 2048 -> "2K", 1536 -> "1.5K", 1048576 -> "1M": context lengths are powers of two, so K and M
// are 1024 and 1048576 here; lengths below 1K print whole.
inline std::string format_length(long long tokens) {
    char buf[32];
    const long long unit = tokens >= 1048576 ? 1048576 : 1024;
    const char* suffix = unit == 1048576 ? "M" : "K";
    if (tokens < 1024) std::snprintf(buf, sizeof buf, "%lld", tokens);
    else if (tokens % unit == 0) std::snprintf(buf, sizeof buf, "%lld%s", tokens / unit, suffix);
    else std::snprintf(buf, sizeof buf, "%.1f%s", (double)tokens / unit, suffix);
    return buf;
}

// Red -> yellow -> green, light enough that dark cell text stays readable on every color.
inline Rgb heatmap_color(double v) {
    static const Rgb red{226, 82, 68}, yellow{250, 222, 100}, green{74, 178, 96};
    v = std::min(1.0, std::max(0.0, v));
    const Rgb& a = v < 0.5 ? red : yellow;
    const Rgb& b = v < 0.5 ? yellow : green;
    const double t = v < 0.5 ? v * 2 : (v - 0.5) * 2;
    auto mix = [t](uint8_t p, uint8_t q) { return (uint8_t)std::lround(p + (q - p) * t); };
    return Rgb{mix(a.r, b.r), mix(a.g, b.g), mix(a.b, b.b)};
}

constexpr Rgb kHeatmapWhite{255, 255, 255}, kHeatmapInk{34, 34, 34}, kHeatmapNoData{222, 222, 222};

// Where everything goes, in pixels; draw_heatmaps paints it and tests read cell positions from it.
struct HeatmapLayout {
    static constexpr int cell_h = 40;  // the cell's fill is one pixel narrower and shorter
    static constexpr int big = 2;      // font scale of titles, cell values and tick labels
    static constexpr int margin = 20;
    int width = 0, height = 0;
    int cell_w = 48;
    int grid_y = 0;              // top of every grid
    std::vector<int> grid_x;     // left of each panel's grid
    std::vector<int> title_x;    // left of each panel's title
    int col_label_scale = big;   // 1 where the column labels would not fit under a cell
    int title_y = 0, col_label_y_gap = 6, x_title_y = 0, caption_y = 0, caption_scale = big;
    int x_title_x = 0, y_title_x = 0, y_title_y = 0;
    int bar_x = 0, bar_y = 0, bar_w = 22, bar_h = 0, bar_label_x = 0;

    int cell_x(size_t panel, size_t col) const { return grid_x[panel] + (int)col * cell_w; }
    int cell_y(size_t row) const { return grid_y + (int)row * cell_h; }
};

inline void check_heatmap_panels(const std::vector<HeatmapPanel>& panels) {
    if (panels.empty()) fatal("heatmap: no panels to draw");
    for (const HeatmapPanel& p : panels) {
        if (p.rows.empty() || p.cols.empty())
            fatal("heatmap panel '%s' has %zu rows and %zu columns: it needs at least one of each",
                  p.title.c_str(), p.rows.size(), p.cols.size());
        if (p.cells.size() != p.rows.size() * p.cols.size())
            fatal("heatmap panel '%s' has %zu cells for %zu rows x %zu columns", p.title.c_str(),
                  p.cells.size(), p.rows.size(), p.cols.size());
    }
}

inline int max_text_width(const std::vector<std::string>& texts, int scale) {
    int w = 0;
    for (const std::string& t : texts) w = std::max(w, text_width(t, scale));
    return w;
}

inline HeatmapLayout heatmap_layout(const std::vector<HeatmapPanel>& panels, const std::string& x_title,
                                    const std::string& y_title, const std::string& caption) {
    check_heatmap_panels(panels);
    HeatmapLayout L;
    const int big = HeatmapLayout::big, glyph_h = kGlyphH * big, m = HeatmapLayout::margin;

    // Cells widen, up to 60 pixels, until the column labels fit in the big font with 10 pixels
    // between neighbours ("128K" needs 56); longer labels take the small font instead.
    int col_label_w = 0;
    for (const HeatmapPanel& p : panels) col_label_w = std::max(col_label_w, max_text_width(p.cols, big));
    L.cell_w = std::max(48, col_label_w + 10);
    if (L.cell_w > 60) {
        L.cell_w = 48;
        L.col_label_scale = 1;
    }

    // Left to right: the y title, then per panel its row labels and grid (the title centered
    // over the grid, widening the panel if it is the wider), then the color bar and its labels.
    L.y_title_x = m;
    int x = m + glyph_h + 12, max_rows = 0;
    for (const HeatmapPanel& p : panels) {
        const int label_w = max_text_width(p.rows, big);
        const int grid_x = x + label_w + 8, grid_w = (int)p.cols.size() * L.cell_w;
        const int title_w = text_width(p.title, big);
        const int title_x = std::max(x, grid_x + (grid_w - title_w) / 2);
        L.grid_x.push_back(grid_x);
        L.title_x.push_back(title_x);
        x = std::max(grid_x + grid_w, title_x + title_w) + 32;
        max_rows = std::max(max_rows, (int)p.rows.size());
    }
    L.bar_x = x - 8;
    L.bar_label_x = L.bar_x + L.bar_w + 8;
    int right = L.bar_label_x + text_width("100%", big) + m;

    // Top to bottom: panel titles, the grids (top-aligned; the bar at least 3 cells tall so its
    // three labels never touch), tick labels, the x title, the caption.
    L.title_y = m;
    L.grid_y = L.bar_y = m + glyph_h + 10;
    L.bar_h = std::max(max_rows, 3) * L.cell_h;
    L.x_title_y = L.grid_y + L.bar_h + L.col_label_y_gap + glyph_h + 20;
    L.caption_y = L.x_title_y + glyph_h + 24;

    const int span_left = L.grid_x.front(), span_right = L.grid_x.back() + (int)panels.back().cols.size() * L.cell_w;
    L.x_title_x = std::max(m, (span_left + span_right - text_width(x_title, big)) / 2);
    right = std::max(right, L.x_title_x + text_width(x_title, big) + m);
    if (m + text_width(caption, big) + m > right) L.caption_scale = 1;
    right = std::max(right, m + text_width(caption, L.caption_scale) + m);
    L.width = right;

    // The y title is centered on the bar's height; a longer one pushes the caption down.
    const int y_len = text_width(y_title, big);
    L.y_title_y = std::max(m, L.grid_y + (L.bar_h - y_len) / 2);
    L.caption_y = std::max(L.caption_y, L.y_title_y + y_len + 8);
    L.height = L.caption_y + kLineHeight * L.caption_scale + m;
    if (L.width > kPngMaxSide || L.height > kPngMaxSide)
        fatal("heatmap would be %dx%d pixels, over the limit of %d a side: draw fewer rows, columns or panels",
              L.width, L.height, kPngMaxSide);
    return L;
}

// The value as a whole percent, clamped like the color so the text never outgrows its cell.
inline std::string heatmap_percent(double v) {
    return std::to_string(std::lround(100 * std::min(1.0, std::max(0.0, v))));
}

inline void draw_heatmap_panel(RgbImage& img, const HeatmapLayout& L, size_t pi, const HeatmapPanel& p) {
    const int big = HeatmapLayout::big, glyph_h = kGlyphH * big;
    draw_text(img, L.title_x[pi], L.title_y, p.title, kHeatmapInk, big);
    for (size_t r = 0; r < p.rows.size(); r++) {
        const int y = L.cell_y(r);
        const int label_x = L.grid_x[pi] - 8 - text_width(p.rows[r], big);  // right-aligned
        draw_text(img, label_x, y + (L.cell_h - 1 - glyph_h) / 2, p.rows[r], kHeatmapInk, big);
        for (size_t c = 0; c < p.cols.size(); c++) {
            const int x = L.cell_x(pi, c);
            const double v = p.cells[r * p.cols.size() + c];
            // The fill leaves one white column and row per cell: the grid lines.
            if (std::isnan(v)) {
                img.fill_rect(x, y, L.cell_w - 1, L.cell_h - 1, kHeatmapNoData);
                continue;
            }
            img.fill_rect(x, y, L.cell_w - 1, L.cell_h - 1, heatmap_color(v));
            const std::string s = heatmap_percent(v);
            draw_text(img, x + (L.cell_w - 1 - text_width(s, big)) / 2, y + (L.cell_h - 1 - glyph_h) / 2, s,
                      kHeatmapInk, big);
        }
    }
    const int label_y = L.cell_y(p.rows.size()) + L.col_label_y_gap;
    const int s = L.col_label_scale;
    for (size_t c = 0; c < p.cols.size(); c++)
        draw_text(img, L.cell_x(pi, c) + (L.cell_w - 1 - text_width(p.cols[c], s)) / 2, label_y, p.cols[c],
                  kHeatmapInk, s);
}

inline void draw_heatmap_colorbar(RgbImage& img, const HeatmapLayout& L) {
    const int big = HeatmapLayout::big, glyph_h = kGlyphH * big;
    for (int i = 0; i < L.bar_h; i++)
        img.fill_rect(L.bar_x, L.bar_y + i, L.bar_w, 1, heatmap_color(1.0 - (double)i / (L.bar_h - 1)));
    img.fill_rect(L.bar_x - 1, L.bar_y - 1, L.bar_w + 2, 1, kHeatmapInk);
    img.fill_rect(L.bar_x - 1, L.bar_y + L.bar_h, L.bar_w + 2, 1, kHeatmapInk);
    img.fill_rect(L.bar_x - 1, L.bar_y, 1, L.bar_h, kHeatmapInk);
    img.fill_rect(L.bar_x + L.bar_w, L.bar_y, 1, L.bar_h, kHeatmapInk);
    const char* labels[3] = {"100%", "50%", "0%"};
    for (int k = 0; k < 3; k++) {
        const int y = L.bar_y + k * (L.bar_h - 1) / 2;
        img.fill_rect(L.bar_x + L.bar_w + 1, y, 4, 1, kHeatmapInk);  // tick
        draw_text(img, L.bar_label_x, y - glyph_h / 2, labels[k], kHeatmapInk, big);
    }
}

inline RgbImage draw_heatmaps(const std::vector<HeatmapPanel>& panels, const std::string& x_title,
                              const std::string& y_title, const std::string& caption) {
    const HeatmapLayout L = heatmap_layout(panels, x_title, y_title, caption);
    const int big = HeatmapLayout::big;
    RgbImage img(L.width, L.height, kHeatmapWhite);
    for (size_t i = 0; i < panels.size(); i++) draw_heatmap_panel(img, L, i, panels[i]);
    draw_heatmap_colorbar(img, L);
    draw_text(img, L.x_title_x, L.x_title_y, x_title, kHeatmapInk, big);
    draw_text_vertical(img, L.y_title_x, L.y_title_y, y_title, kHeatmapInk, big);
    draw_text(img, HeatmapLayout::margin, L.caption_y, caption, kHeatmapInk, L.caption_scale);
    return img;
}
