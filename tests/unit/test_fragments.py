"""`Fragments`: text appended a token at a time reads back whole, in order."""

from gateway.engine.fragments import FOLD, Fragments


def test_pieces_read_back_in_order_across_folds() -> None:
    pieces = [f"<{k}>" for k in range(FOLD * 3 + 5)]
    text = Fragments(pieces[0])
    for piece in pieces[1:]:
        text.append(piece)
    assert str(text) == "".join(pieces)
    assert len(text._parts) <= 4 + FOLD  # folded, not one string per piece


def test_empty_and_single() -> None:
    assert str(Fragments()) == ""
    one = Fragments()
    one.append("a")
    assert str(one) == "a"
