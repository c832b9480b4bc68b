import { copyFile } from "node:fs/promises"
import { defineConfig } from "tsup"

// The library entry (with its declarations) and the CLI bin. The control protocol is shipped beside them, so a
// team that installs the kit alone has the document it implements (dist/control-protocol.md).
export default defineConfig({
  entry: ["src/index.ts", "src/cli.ts"],
  format: ["esm"],
  dts: false,
  sourcemap: true,
  clean: true,
  target: "node22",
  onSuccess: () => copyFile(new URL("../docs/control-protocol.md", import.meta.url), new URL("dist/control-protocol.md", import.meta.url))
})
