"""Approval rules: when a server tool asks a human first, decided on the call's arguments.

A tool marked for approval asks for every call. With a rule it asks only for the calls the
rule holds for: `amount > 100`, `to not in ["ops@example.com"]`, `priority == "high" or
dry_run == false`. A rule is the operator's, never a client's: an expression in the agents
file (`approval_rules`), or a Python predicate registered with the tool
(`@server_tool(approval=lambda args: ...)`).

The expression language is small and evaluated here, never by `eval`: names are the call's
arguments (`a.b` reads a nested object's member), literals are strings, numbers, booleans,
null and lists of them; the operators are comparisons (`== != < <= > >=`, `in`, `not in`),
`and`, `or`, `not` and unary minus. It is parsed once, at start-up, where an expression outside
the language stops the gateway, and bounded in length and size. A rule that cannot be decided
for a call (a missing argument, values that do not compare, a predicate that raises) asks:
a rule can only spare a human a question, never skip one it was unsure of.
"""

from __future__ import annotations

import ast
import logging
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

MAX_RULE_CHARS = 500
MAX_RULE_NODES = 100

_COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], bool]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
}
# The literals of JSON as a rule spells them (`true`, `false`, `null`, as in the arguments).
_NAMED = {"true": True, "false": False, "null": None}


class RuleError(ValueError):
    """An expression outside the rule language (the message says where)."""


class _Undecided(Exception):
    """The rule cannot be decided for these arguments."""


@dataclass(frozen=True)
class ApprovalRule:
    """When a tool asks first: `text` is what the operator wrote (shown with the pending
    approval), `holds` decides it for a call's arguments."""

    text: str
    check: Callable[[Mapping[str, Any]], Any]

    def asks(self, arguments: Mapping[str, Any]) -> bool:
        """Whether this call must ask a human: the rule holds, or cannot be decided."""
        try:
            return bool(self.check(arguments))
        except _Undecided:
            return True
        except Exception:  # a predicate's own failure: ask, and tell the operator
            log.warning("approval rule %s failed; the call asks first", self.text,
                        exc_info=True)
            return True


def predicate_rule(predicate: Callable[[Mapping[str, Any]], Any]) -> ApprovalRule:
    """A Python predicate registered with a tool, as a rule."""
    name = getattr(predicate, "__qualname__", None) or type(predicate).__name__
    return ApprovalRule(f"python:{name}", predicate)


def parse_rule(text: str) -> ApprovalRule:
    """An expression of the rule language as a rule, or `RuleError`."""
    if not isinstance(text, str) or not text.strip():
        raise RuleError("is empty")
    if len(text) > MAX_RULE_CHARS:
        raise RuleError(f"is longer than {MAX_RULE_CHARS} characters")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise RuleError(f"is not an expression: {exc.msg}") from None
    nodes = sum(1 for _ in ast.walk(tree))
    if nodes > MAX_RULE_NODES:
        raise RuleError(f"has more than {MAX_RULE_NODES} parts")
    _check(tree.body)
    body = tree.body
    return ApprovalRule(text.strip(), lambda arguments: _value(body, arguments))


def _check(node: ast.AST) -> None:
    """Refuse anything outside the language (calls, subscripts, arithmetic, lambdas, ...)."""
    if isinstance(node, ast.BoolOp):
        for value in node.values:
            _check(value)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.USub)):
        _check(node.operand)
    elif isinstance(node, ast.Compare):
        if not all(type(op) in _COMPARE for op in node.ops):
            raise RuleError("compares with an operator outside == != < <= > >= in, not in")
        for part in (node.left, *node.comparators):
            _check(part)
    elif isinstance(node, (ast.List, ast.Tuple)):
        for item in node.elts:
            if not isinstance(item, ast.Constant) and not (
                    isinstance(item, ast.UnaryOp) and isinstance(item.op, ast.USub)
                    and isinstance(item.operand, ast.Constant)):
                raise RuleError("lists may hold only literals")
            _check(item)
    elif isinstance(node, ast.Constant):
        if not isinstance(node.value, (str, int, float, bool)) and node.value is not None:
            raise RuleError(f"has a literal of a kind rules do not know: {node.value!r}")
    elif isinstance(node, ast.Name):
        if node.id.startswith("_"):
            raise RuleError(f"names {node.id!r}: argument names in rules cannot start with _")
    elif isinstance(node, ast.Attribute):
        if node.attr.startswith("_"):
            raise RuleError(f"reads {node.attr!r}: members in rules cannot start with _")
        _check(node.value)
        if not isinstance(node.value, (ast.Name, ast.Attribute)):
            raise RuleError("reads a member of something that is not an argument")
    else:
        raise RuleError(f"uses {type(node).__name__}, which rules do not have (only "
                        "comparisons, and, or, not, arguments and literals)")


def _value(node: ast.AST, arguments: Mapping[str, Any]) -> Any:
    if isinstance(node, ast.BoolOp):
        if isinstance(node.op, ast.And):
            return all(_truth(_value(v, arguments)) for v in node.values)
        return any(_truth(_value(v, arguments)) for v in node.values)
    if isinstance(node, ast.UnaryOp):
        operand = _value(node.operand, arguments)
        if isinstance(node.op, ast.Not):
            return not _truth(operand)
        if not isinstance(operand, (int, float)) or isinstance(operand, bool):
            raise _Undecided
        return -operand
    if isinstance(node, ast.Compare):
        left = _value(node.left, arguments)
        for op, right_node in zip(node.ops, node.comparators, strict=True):
            right = _value(right_node, arguments)
            try:
                if not _COMPARE[type(op)](left, right):
                    return False
            except TypeError:  # "a" < 3, 3 in 5
                raise _Undecided from None
            left = right
        return True
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_value(item, arguments) for item in node.elts]
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in arguments:
            return arguments[node.id]
        if node.id in _NAMED:
            return _NAMED[node.id]
        raise _Undecided
    if isinstance(node, ast.Attribute):
        holder = _value(node.value, arguments)
        if not isinstance(holder, Mapping) or node.attr not in holder:
            raise _Undecided
        return holder[node.attr]
    raise _Undecided  # not reached: `_check` allowed nothing else


def _truth(value: Any) -> bool:
    if not isinstance(value, bool):
        raise _Undecided  # `amount and ...`: say what you mean
    return value
