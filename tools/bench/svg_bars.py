"""Grouped bar charts as SVG, for the plot-* scripts: one group per benchmark point, one bar per
series, a legend below. Imported from the same folder."""


def bar_chart(title, groups, series, width=760, height=360):
    """groups: [(label line 1, label line 2, [value per series])]; series: [(name, colour)].
    A value of None draws no bar (the point produced no figure)."""
    left, bottom, top, right = 60, 60, 30, 20
    peak = max(v for _, _, values in groups for v in values if v is not None) * 1.1
    slot = (width - left - right) / len(groups)
    bar = slot * 0.7 / len(series)
    y0 = height - bottom
    span = height - bottom - top
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           'font-family="sans-serif" font-size="11">',
           f'<text x="{width/2}" y="18" text-anchor="middle" font-size="13">{title}</text>']
    for i in range(6):
        v = peak * i / 5
        y = y0 - span * i / 5
        out.append(f'<line x1="{left}" x2="{width-right}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left-6}" y="{y+4:.1f}" text-anchor="end">{v:.2f}</text>')
    for i, (line1, line2, values) in enumerate(groups):
        x = left + i * slot + slot * 0.12
        for j, (v, (_, colour)) in enumerate(zip(values, series)):
            if v is None:
                continue
            h = span * v / peak
            out.append(f'<rect x="{x + j*bar:.1f}" y="{y0-h:.1f}" width="{bar:.1f}" '
                       f'height="{h:.1f}" fill="{colour}"/>')
        middle = x + bar * len(series) / 2
        out.append(f'<text x="{middle:.1f}" y="{y0+14}" text-anchor="middle">{line1}</text>')
        out.append(f'<text x="{middle:.1f}" y="{y0+27}" text-anchor="middle">{line2}</text>')
    x = left
    for name, colour in series:
        out.append(f'<rect x="{x}" y="{height-18}" width="10" height="10" fill="{colour}"/>'
                   f'<text x="{x+14}" y="{height-9}">{name}</text>')
        x += 14 + 7 * len(name) + 20
    out.append("</svg>")
    return "\n".join(out)
