/**
 * Writes the OpenAPI document the handler serves (generated from the routes' Schemas) to the path given, for
 * `pnpm check:openapi` to lint.
 */
import { writeFileSync } from "node:fs"
import { OpenApi, Routes } from "../src/index.js"

const target = process.argv[2]
if (target === undefined) throw new Error("usage: writeOpenApi.ts <file>")
writeFileSync(target, JSON.stringify(OpenApi.make(Routes.routes), null, 2))
