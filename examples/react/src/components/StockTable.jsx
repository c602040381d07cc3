import { useTamboComponentState } from "@tambo-ai/react";
import { z } from "zod";

/** What the model must send to render the table (becomes the `show_component_StockTable` tool). */
export const stockTableProps = z.object({
  title: z.string().describe("A short heading for the table"),
  stocks: z
    .array(
      z.object({
        symbol: z.string().describe("Ticker symbol, e.g. ACME"),
        price: z.number().describe("Last price in USD"),
        changePercent: z.number().describe("Change since yesterday's close, in percent"),
      }),
    )
    .describe("One row per stock"),
});

/**
 * A table of stock quotes the model renders; the user picks one row to watch.
 *
 * The picked symbol lives in component state (`useTamboComponentState`): the SDK saves it on the
 * gateway (`POST /v1/threads/{id}/components/{componentId}/state`), so it survives a reload and
 * the model sees it on the next turn. Props arrive while they stream, so every field may still be
 * missing on the first renders.
 */
export function StockTable({ title, stocks }) {
  const [selected, setSelected, { isPending, error }] = useTamboComponentState(
    "selectedSymbol",
    null,
  );
  const rows = Array.isArray(stocks) ? stocks : [];
  return (
    <section className="stock-table" data-testid="stock-table">
      <h3>{title ?? "…"}</h3>
      <table>
        <thead>
          <tr>
            <th>Symbol</th>
            <th>Price</th>
            <th>Change</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {rows.map((row, index) => {
            const isSelected = row?.symbol !== undefined && row.symbol === selected;
            const change = typeof row?.changePercent === "number" ? row.changePercent : null;
            return (
              <tr
                key={row?.symbol ?? index}
                className={isSelected ? "selected" : undefined}
                data-testid="stock-row"
                data-symbol={row?.symbol}
              >
                <td className="symbol">{row?.symbol ?? "…"}</td>
                <td>{typeof row?.price === "number" ? `$${row.price.toFixed(2)}` : "…"}</td>
                <td className={change === null ? "" : change >= 0 ? "up" : "down"}>
                  {change === null ? "…" : `${change >= 0 ? "+" : ""}${change.toFixed(2)}%`}
                </td>
                <td>
                  <button
                    type="button"
                    onClick={() => setSelected(isSelected ? null : row.symbol)}
                    disabled={row?.symbol === undefined}
                  >
                    {isSelected ? "Watching" : "Watch"}
                  </button>
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
      <p className="state-line" data-testid="stock-state">
        {selected ? `Watching ${selected}` : "Not watching any stock"}
        {isPending ? " · saving…" : ""}
        {error ? ` · could not save: ${error.message}` : ""}
      </p>
    </section>
  );
}
