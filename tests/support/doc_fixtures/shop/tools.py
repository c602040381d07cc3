"""Example Shop's tools, as docs/agents.md imports them (a stand-in for the operator's own)."""

from __future__ import annotations


def find_order(order_id: str) -> dict[str, str]:
    """Look up an order by id."""
    return {"order_id": order_id, "status": "shipped"}


def find_invoice(invoice_id: str) -> dict[str, str]:
    """Look up an invoice by id."""
    return {"invoice_id": invoice_id, "total": "120 EUR"}
