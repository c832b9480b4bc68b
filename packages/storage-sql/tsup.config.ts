import { defineConfig } from "tsup"

export default defineConfig({
  entry: ["src/index.ts"],
  format: ["esm"],
  dts: false,
  sourcemap: true,
  clean: true,
  target: "node22",
  // The drivers are optional peers: each layer loads its own on demand, so they stay out of the bundle.
  external: ["better-sqlite3", "pg"]
})
