import { defineConfig } from "tsup"

// The library entry (with its declarations) and the CLI bin.
export default defineConfig({
  entry: ["src/index.ts", "src/cli.ts"],
  format: ["esm"],
  dts: { entry: "src/index.ts" },
  sourcemap: true,
  clean: true,
  target: "node22"
})
