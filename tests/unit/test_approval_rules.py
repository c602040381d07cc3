"""The approval rules' expression language: what it takes, what it refuses at start-up, and
that a rule it cannot decide for a call asks (fails closed)."""

from __future__ import annotations

import pytest

from gateway.engine.tools.approval_rules import RuleError, parse_rule, predicate_rule


@pytest.mark.parametrize(("rule", "arguments", "asks"), [
    ("amount > 100", {"amount": 150}, True),
    ("amount > 100", {"amount": 50}, False),
    ("amount >= -5 and currency == 'EUR'", {"amount": 0, "currency": "EUR"}, True),
    ("to not in ['ops@example.com', 'me@example.com']", {"to": "ops@example.com"}, False),
    ("to in ['ops@example.com']", {"to": "x@example.com"}, False),
    ("not dry_run or force == true", {"dry_run": True, "force": False}, False),
    ("not dry_run or force == true", {"dry_run": False}, True),
    ("order.total > 10", {"order": {"total": 12}}, True),
    ("0 < n < 3", {"n": 5}, False),
    ("note == null", {"note": None}, True),
    # Undecided: a missing argument, values that do not compare, a non-boolean in `and`.
    ("amount > 100", {}, True),
    ("amount > 100", {"amount": "lots"}, True),
    ("order.total > 10", {"order": 5}, True),
    ("amount and true", {"amount": 5}, True),
])
def test_rules_decide_on_the_arguments(rule: str, arguments: dict, asks: bool) -> None:
    assert parse_rule(rule).asks(arguments) is asks


@pytest.mark.parametrize("rule", [
    "", "   ", "__import__('os').system('x')", "open('f')", "amount + 1 > 2", "amount[0] > 1",
    "lambda: 1", "x.__class__ == 1", "_private == 1", "amount is None", "[a] == [1]",
    "(yield 1)", "1 if a else 2", "{'a': 1} == a", "a > " + "1" * 600, "a ==",
    " or ".join(f"a == {i}" for i in range(60)), "f'{a}' == 'x'", "a == b'x'",
])
def test_anything_outside_the_language_is_refused(rule: str) -> None:
    with pytest.raises(RuleError):
        parse_rule(rule)


def test_a_predicate_that_raises_asks() -> None:
    def strict(arguments):
        return arguments["amount"] > 100

    rule = predicate_rule(strict)
    assert rule.text.endswith("strict")
    assert rule.asks({"amount": 200}) and not rule.asks({"amount": 1})
    assert rule.asks({})  # KeyError: ask
