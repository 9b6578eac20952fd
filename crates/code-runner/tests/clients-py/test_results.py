"""Issue 45, item 1: everyday values come back as their JSON form, in both
languages, and what has none says why in `result_note` instead of a
silent null."""

from harness import server, structured

PYTHON = """
import numpy as np, pandas as pd, datetime, decimal
df = pd.DataFrame({"a": [1, 2, None], "k": ["x", "y", "z"]})
result = {
    "sum": df["a"].fillna(0).astype("int64").sum(),
    "arange": np.arange(3),
    "series": pd.Series([1.5, None], index=["p", "q"]),
    "records": df,
    "nan": [1.0, float("nan"), float("inf")],
    "ts": pd.Timestamp("2024-05-01T12:30:00"),
    "date": datetime.date(2024, 1, 2),
    "set": {3, 1, 2},
    "tuple": (1, "two"),
    "dec": [decimal.Decimal("2.5"), decimal.Decimal("0.1")],
}
"""

EXPECTED = {
    "sum": 3,
    "arange": [0, 1, 2],
    "series": {"p": 1.5, "q": None},
    "records": [{"a": 1.0, "k": "x"}, {"a": 2.0, "k": "y"}, {"a": None, "k": "z"}],
    "nan": [1.0, None, None],
    "ts": "2024-05-01T12:30:00",
    "date": "2024-01-02",
    "set": [1, 2, 3],
    "tuple": [1, "two"],
    "dec": [2.5, "0.1"],
}


async def test_python_values_come_back_as_their_json_form(mode):
    with server() as s:
        async with s.client(mode) as client:
            answer = structured(await client.call_tool("run", {"lang": "python", "code": PYTHON}))
            assert answer["result"] == EXPECTED, answer
            assert "result_note" not in answer, answer


async def test_what_has_no_json_form_says_why(mode):
    with server() as s:
        async with s.client(mode) as client:
            answer = structured(await client.call_tool(
                "run", {"lang": "python", "code": "result = {'ok': 1, 'bad': object()}"}))
            assert answer["result"] is None
            note = answer["result_note"]
            assert "result['bad']" in note and "object" in note and "vars(x)" in note, note
            answer = structured(await client.call_tool(
                "run", {"lang": "python", "code": "x = 41\nx + 1"}))
            assert answer["result"] is None
            assert "`x + 1`" in answer["result_note"] and "result = " in answer["result_note"], answer
            answer = structured(await client.call_tool(
                "run", {"lang": "node", "code": "return {a: 1, big: 10n}"}))
            assert answer["result"] is None
            assert "BigInt" in answer["result_note"] and "Number(x)" in answer["result_note"], answer


async def test_javascript_follows_json_stringify(mode):
    code = "return {a: 1, b: undefined, n: NaN, d: new Date(0), arr: [undefined, () => 1, Infinity], m: new Map([[1, 2]])}"
    with server() as s:
        async with s.client(mode) as client:
            answer = structured(await client.call_tool("run", {"lang": "node", "code": code}))
            assert answer["result"] == {
                "a": 1, "n": None, "d": "1970-01-01T00:00:00.000Z", "arr": [None, None, None], "m": {},
            }, answer
            assert "Map" in answer["result_note"] and "Object.fromEntries" in answer["result_note"], answer
