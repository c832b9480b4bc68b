import { copyFileSync, mkdirSync } from "node:fs"
import { dirname, join } from "node:path"
import { defineConfig } from "tsup"
import { BUILT_PATH, packagedPath } from "./src/ApiReferenceScript.js"

export default defineConfig({
  entry: ["src/index.ts", "src/main.ts"],
  format: ["esm"],
  dts: false,
  sourcemap: true,
  clean: true,
  target: "node22",
  // The API reference's browser bundle ships in dist, so an install needs none of its package's dependencies.
  onSuccess: async () => {
    const target = join("dist", BUILT_PATH)
    mkdirSync(dirname(target), { recursive: true })
    copyFileSync(packagedPath(import.meta.url), target)
    copyFileSync(join("licenses", "scalar-api-reference.LICENSE"), join(dirname(target), "LICENSE"))
  }
})
