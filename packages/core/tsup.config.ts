import { defineConfig } from "tsup"

export default defineConfig({
  entry: ["src/index.ts", "src/promise.ts"],
  format: ["esm"],
  dts: false,
  sourcemap: true,
  clean: true,
  target: "node22"
})
