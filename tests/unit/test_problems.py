"""One catalogue of problem codes (`gateway/protocol/problems.py`): every refusal names a member
of it, so a code has one status wherever it is raised, and the documented list of codes
(`docs/errors.md`, the OpenAPI document) is the catalogue."""

from __future__ import annotations

import re
from pathlib import Path

from gateway.openapi.problems_report import PROBLEMS_PATH, problems_markdown
from gateway.protocol.operations import CODES, MODEL_ERRORS
from gateway.protocol.problems import CATALOGUE, ApiError, Problem
from gateway.server.problem_json import problem

ROOT = Path(__file__).resolve().parents[2]
GATEWAY = ROOT / "gateway"
# A refusal built from a literal status or code instead of a member of the catalogue.
LITERAL = re.compile(r'\b(ApiError|problem|ComponentStateError|QuotaExceeded|_refused)\(\s*'
                     r'(\d+\s*,|"[A-Z_]+"|f")')
MEMBER = re.compile(r'\bProblem(?:\.([A-Z_]+)|\["([A-Z_]+)"\])')


def sources() -> list[tuple[Path, str]]:
    return [(path, path.read_text()) for path in sorted(GATEWAY.rglob("*.py"))]


def test_no_refusal_spells_its_status_or_code_outside_the_catalogue() -> None:
    literal = [f"{path.relative_to(ROOT)}: {match.group(0)}" for path, text in sources()
               for match in LITERAL.finditer(text)]
    assert not literal, f"name a member of protocol.problems.Problem instead: {literal}"


def test_every_code_named_in_the_code_is_in_the_catalogue() -> None:
    named = {a or b for _, text in sources() for a, b in MEMBER.findall(text)}
    assert len(named) > 30, "found few Problem members in gateway/: has the pattern changed?"
    assert named - set(CATALOGUE) == set()


def test_codes_looked_up_by_value_are_in_the_catalogue_with_their_status() -> None:
    """Provider errors of one-shot calls (502) and attachment refusals are looked up by the
    code their own error carries (`Problem[exc.code]`)."""
    classified = set(re.findall(r'ModelError\(\s*"([A-Z_]+)"',
                                (GATEWAY / "engine" / "models" / "litellm_model.py").read_text()))
    assert classified and classified == set(MODEL_ERRORS)
    assert {CATALOGUE[code].status for code in MODEL_ERRORS} == {502}
    attachments = set(re.findall(r'AttachmentError\(\s*"([A-Z_]+)"',
                                 (GATEWAY / "engine" / "attachments.py").read_text()))
    assert attachments and {code: CATALOGUE[code].status for code in attachments} == {
        code: 413 if code.endswith("TOO_LARGE") else 400 for code in attachments}


def test_the_documented_codes_are_the_catalogue() -> None:
    assert (ROOT / PROBLEMS_PATH).read_text("utf-8") == problems_markdown(), (
        f"{PROBLEMS_PATH} differs from gateway/protocol/problems.py; run `gateway openapi`")
    documented = re.findall(r"^\| `([A-Z_]+)` \| (\d+) \|", problems_markdown(), re.MULTILINE)
    assert {code: int(status) for code, status in documented} == {
        p.name: p.status for p in Problem}
    assert CODES is CATALOGUE  # what the OpenAPI document lists


def test_a_problem_answers_with_the_catalogue_status_title_and_code() -> None:
    error = ApiError(Problem.THREAD_NOT_FOUND, "Thread t not found", threadId="t")
    assert (error.status, error.code) == (404, "THREAD_NOT_FOUND")
    response = problem(error.problem, error.detail, **error.extra)
    assert response.status_code == 404
    assert response.media_type == "application/problem+json"
    body = response.body.decode()
    for field in ('"type":"urn:tambo:error:thread_not_found"', '"title":"Thread Not Found"',
                  '"status":404', '"code":"THREAD_NOT_FOUND"', '"threadId":"t"',
                  '"message":"Thread t not found"'):
        assert field in body
