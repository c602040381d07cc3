import { defineConfig } from "vite";
import react from "@vitejs/plugin-react";

// The gateway's address is read at build time from VITE_GATEWAY_URL (see src/config.js).
export default defineConfig({
  plugins: [react()],
  // @tambo-ai/react bundles its MCP and voice support: one ~1.8 MB chunk is expected here.
  build: { chunkSizeWarningLimit: 2500 },
  server: { host: "127.0.0.1", port: 5173 },
  preview: { host: "127.0.0.1", port: 4173 },
});
