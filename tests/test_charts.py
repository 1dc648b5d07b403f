"""console.charts: SVG pictures that escape every label and describe their data to screen readers."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from console import charts

SVG = "{http://www.w3.org/2000/svg}"
HOSTILE = '<script>alert("x")</script> & "quotes"'


def parse(markup: str) -> ET.Element:
    return ET.fromstring(str(markup))  # well-formed XML or this raises


def test_a_line_chart_is_an_accessible_picture_with_a_gap_where_there_is_no_data():
    svg = parse(
        charts.line_chart(
            "Resumed without data loss",
            ["Mon", "Tue", "Wed", "Thu"],
            [charts.Line("share", [0.5, None, 0.75, 1.0])],
            fmt=charts.percent,
            y_max=1.0,
        )
    )
    assert svg.get("role") == "img"
    title, desc = svg.find(f"{SVG}title"), svg.find(f"{SVG}desc")
    assert title.text == "Resumed without data loss"
    assert desc.text == "share: Mon 50 %, Tue no data, Wed 75 %, Thu 100 %"
    assert svg.get("aria-labelledby") == f"{title.get('id')} {desc.get('id')}"
    assert len(svg.findall(f"{SVG}polyline")) == 2  # the missing Tuesday breaks the line
    assert len(svg.findall(f"{SVG}circle")) == 3


def test_agent_supplied_labels_are_escaped_everywhere():
    for markup in (
        charts.line_chart(HOSTILE, [HOSTILE], [charts.Line(HOSTILE, [1.0])], area=True),
        charts.column_chart(HOSTILE, [HOSTILE], [charts.Line(HOSTILE, [3.0])]),
        charts.bar_chart(HOSTILE, [charts.Bar(HOSTILE, 2.0, href="/resumes/?kind=" + HOSTILE, note=HOSTILE)]),
        charts.heatmap(HOSTILE, [HOSTILE], [HOSTILE], [[1.0]], notes=[[HOSTILE]], legend=HOSTILE),
    ):
        assert "<script>" not in markup
        svg = parse(markup)
        texts = [t.text for t in svg.iter() if t.text]
        assert HOSTILE in texts or any(HOSTILE in t for t in texts)  # shown as text, intact


def test_bars_link_only_inside_the_console():
    markup = charts.bar_chart(
        "By agent",
        [
            charts.Bar("a", 1, href="/resumes/workflows?agent=a"),
            charts.Bar("b", 2, href="javascript:alert(1)"),
            charts.Bar("c", 3, href="//evil.example/"),
        ],
    )
    links = parse(markup).findall(f"{SVG}a")
    assert [a.get("href") for a in links] == ["/resumes/workflows?agent=a"]


def test_columns_put_each_series_side_by_side():
    svg = parse(
        charts.column_chart(
            "Launches and resumes", ["1", "2"], [charts.Line("launches", [10, 20]), charts.Line("resumes", [3, 0])]
        )
    )
    bars = svg.findall(f"{SVG}rect[@class='chart-bar chart-s1']") + svg.findall(
        f"{SVG}rect[@class='chart-bar chart-s2']"
    )
    assert len(bars) == 4
    assert svg.find(f"{SVG}desc").text == "launches: 1 10, 2 20; resumes: 1 3, 2 0"


def test_a_heatmap_outlines_flagged_cells_and_says_how_many():
    svg = parse(charts.heatmap("Staffing", ["Mon", "Tue"], ["00", "01"], [[1, 2], [0, 4]], flagged={(1, 1)}))
    flagged = svg.findall(f"{SVG}rect[@class='chart-cell chart-flagged']")
    assert len(flagged) == 1 and flagged[0].find(f"{SVG}title").text == "Tue 01: 4"
    assert svg.find(f"{SVG}desc").text.startswith("1 flagged cells.")


def test_an_empty_bar_chart_says_so():
    svg = parse(charts.bar_chart("By runbook", []))
    assert svg.find(f"{SVG}desc").text == "no data"
    assert any(t.text == "No data in this period" for t in svg.iter(f"{SVG}text"))


def test_a_count_axis_labels_whole_numbers_only():
    import re

    for peak, labels in (
        (1, ["0", "1", "2", "3", "4"]),
        (5, ["0", "2", "4", "6", "8"]),
        (10, ["0", "5", "10", "15", "20"]),
    ):
        svg = str(charts.column_chart("Breaches", ["Mon", "Tue"], [charts.Line("breached", [peak, 0])]))
        assert re.findall(r'class="chart-axis" x="42" y="[\d.]+" text-anchor="end">([^<]*)<', svg) == labels


def test_a_long_bar_label_is_cut_to_what_fits_left_of_the_bar():
    svg = str(charts.bar_chart("By runbook", [charts.Bar("refunds-the-model-timed-out", 1)]))
    assert ">refunds-the-model-t…<" in svg and "refunds-the-model-timed-out: 1" in svg  # whole in the tooltip


def test_the_last_day_is_labelled_and_no_label_crowds_it():
    import re

    days = [f"{d:02d} Nov" for d in range(1, 31)]
    svg = str(charts.column_chart("Met vs breached", days, [charts.Line("breached", [1] * 30)]))
    labels = re.findall(r'text-anchor="middle">(\d\d Nov)<', svg)
    assert labels[0] == "01 Nov" and labels[-2:] == ["25 Nov", "30 Nov"]


def test_a_bar_with_nothing_to_measure_says_no_data_and_draws_no_bar():
    svg = parse(
        charts.bar_chart(
            "Resumed without data loss by reason",
            [charts.Bar("tool_error", 0.5, note="1 of 2"), charts.Bar("rate_limit", None, note="0 of 0")],
            fmt=charts.percent,
            max_value=1.0,
        )
    )
    values = [t.text for t in svg.iter(f"{SVG}text") if "chart-value" in t.get("class", "")]
    assert values == ["50 %", "no data"]
    assert len([r for r in svg.iter(f"{SVG}rect") if "chart-bar" in r.get("class", "")]) == 1
    assert svg.find(f"{SVG}desc").text == "tool_error: 50 % (1 of 2); rate_limit: no data (0 of 0)"


def test_a_legend_too_long_for_one_row_wraps_inside_the_picture_and_the_plot_moves_down():
    names = [
        "Resumed without data loss",
        "Preserved a user-visible checkpoint",
        "Returned to the same owner",
        "Completed after interruption",
    ]
    svg = parse(
        charts.line_chart(
            "The four shares",
            ["Mon", "Tue"],
            [charts.Line(n, [0.5, 0.6]) for n in names],
            fmt=charts.percent,
            y_max=1.0,
            width=640,
            height=240,
        )
    )
    legend = [t for t in svg.iter(f"{SVG}text") if t.get("class") == "chart-legend"]
    assert [t.text for t in legend] == names  # every series named
    for text in legend:  # each entry ends inside the picture, at the width the chart reserves a character
        assert float(text.get("x")) + 7 * len(text.text) <= 640 - 12, text.text
    rows = sorted({float(t.get("y")) for t in legend})
    assert len(rows) >= 2
    assert svg.get("viewBox") == f"0 0 640 {240 + 16 * (len(rows) - 1)}"
    top_gridline = min(float(line.get("y1")) for line in svg.iter(f"{SVG}line"))
    assert top_gridline > rows[-1]  # the plot starts below the legend's last row


def test_a_chart_with_too_little_for_a_trend_says_so():
    svg = parse(
        charts.line_chart(
            "The four shares over time",
            ["Mon", "Tue"],
            [charts.Line("share", [None, 0.5])],
            note="Only one day with data so far (Tue): a trend needs two or more",
        )
    )
    empty = [t.text for t in svg.iter(f"{SVG}text") if t.get("class") == "chart-empty"]
    assert empty == ["Only one day with data so far (Tue): a trend needs two or more"]
    assert svg.find(f"{SVG}desc").text.startswith("Only one day with data so far")


def test_a_heatmap_says_what_its_colours_mean_with_the_values_of_its_scale():
    svg = parse(
        charts.heatmap("Operators needed", ["Mon", "Tue"], ["00", "01"], [[0, 1], [2, 4]], unit="operators needed")
    )
    one = parse(charts.heatmap("Operators needed", ["Mon"], ["00", "01"], [[0, 1]], unit="operators needed"))
    assert [g.find(f"{SVG}text").text for g in one.findall(f"{SVG}g[@class='chart-scale']")] == ["0", "1"]
    scale = svg.findall(f"{SVG}g[@class='chart-scale']")
    assert [g.find(f"{SVG}text").text for g in scale] == ["0", "1", "2", "3", "4"]
    shades = [float(g.find(f"{SVG}rect").get("fill-opacity")) for g in scale]
    assert shades == sorted(shades) and shades[0] < shades[-1]  # lightest at 0, darkest at the peak
    sentence = "Colour: darker is more operators needed, from 0 to 4"
    assert sentence in [t.text for t in svg.iter(f"{SVG}text")]
    assert sentence in svg.find(f"{SVG}desc").text


def test_the_last_x_label_ends_at_the_right_edge_instead_of_being_cut():
    svg = parse(charts.line_chart("Trend", ["17 Nov", "24 Nov", "01 Dec"], [charts.Line("to claim", [7, 6, 2])]))
    labels = [(t.get("text-anchor"), t.text) for t in svg.iter(f"{SVG}text") if t.text and t.text[0] in "012"]
    assert [label for label in labels if label[1] and " " in label[1]] == [
        ("middle", "17 Nov"),
        ("middle", "24 Nov"),
        ("end", "01 Dec"),
    ]
