"""The drift finder's structural diff: dotted paths an operator reads, JSON numbers compared as numbers."""

from workflows.drift import compare, diff, ignored
from workflows.shapes import Json


def paths(found):
    return [(d.path, d.change) for d in found]


def test_nested_changes_additions_and_removals_have_dotted_paths():
    recorded: Json = {"amount": "42.00", "items": [{"sku": "A"}, {"sku": "B"}], "note": "x"}
    replayed: Json = {"amount": "4200.00", "items": [{"sku": "A"}, {"sku": "C"}, {"sku": "D"}], "extra": True}

    assert paths(diff(recorded, replayed)) == [
        ("output.amount", "changed"),
        ("output.items.1.sku", "changed"),
        ("output.items.2", "added"),
        ("output.note", "removed"),
        ("output.extra", "added"),
    ]


def test_json_numbers_compare_as_numbers_but_never_as_booleans_or_strings():
    assert diff({"n": 42}, {"n": 42.0}) == []
    assert paths(diff({"n": 1}, {"n": True})) == [("output.n", "changed")]
    assert paths(diff({"n": "42"}, {"n": 42})) == [("output.n", "changed")]
    assert paths(diff({"n": {"a": 1}}, {"n": [1]})) == [("output.n", "type")]
    assert paths(diff(None, {"a": 1})) == [("output", "type")]


def test_a_huge_output_gives_a_bounded_list_of_differences():
    found = diff({"k": list(range(10_000))}, {"k": [-1] * 10_000})
    assert len(found) == 50


def test_ignore_rules_are_globs_over_the_path():
    assert ignored("output.created_at", ["*_at"])
    assert ignored("output.meta.request_id", ["*.request_id"])
    assert ignored("output.rationale", ["rationale"])  # a bare field name means output.<field>
    assert not ignored("output.amount", ["*_at", "rationale"])


def test_the_explanation_names_the_step_the_field_and_both_values():
    steps = [{"seq": 5, "name": "decide", "kind": "model", "output": {"amount": "42.00", "currency": "EUR"}}]
    found = compare(steps, [{"seq": 5, "output": {"amount": "4200.00", "currency": "USD"}}], from_seq=5, to_seq=5)
    assert found.first_divergent_seq == 5
    assert found.explanation == "step 5 `decide`: output.amount 42.00 → 4200.00 (and 1 more field)"


def test_results_outside_the_range_are_safety_violations():
    steps = [{"seq": 3, "name": "read", "kind": "tool", "output": 1}]
    found = compare(steps, [{"seq": 3, "output": 1}, {"seq": 9, "output": {"refund": "R-2"}}], from_seq=3, to_seq=3)
    assert found.violations == ["The runtime reported step 9, outside the replayed range 3..3."]
