import { StockTable, stockTableProps } from "./StockTable.jsx";

/** Components the model may render; the gateway offers each as a `show_component_<name>` tool. */
export const components = [
  {
    name: "StockTable",
    description:
      "A table of stock quotes (symbol, price, daily change). Use it whenever the user asks to " +
      "see or compare stock prices. The user can pick one stock to watch.",
    component: StockTable,
    propsSchema: stockTableProps,
  },
];
