import react from "@vitejs/plugin-react";
import { defineConfig } from "vite";

// `npm run dev` proxies the runtime (npm run server) under the page's own origin, so the page's
// default runtime URL, /api/copilotkit, works without CORS. A build pointed elsewhere sets
// VITE_RUNTIME_URL.
export default defineConfig({
  plugins: [react()],
  server: {
    host: "127.0.0.1",
    port: 5174,
    proxy: { "/api/copilotkit": process.env.RUNTIME_URL || "http://127.0.0.1:4000" },
  },
});
