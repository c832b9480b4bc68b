import { writeFileSync } from "node:fs"
import { renderProfileDocument } from "./profileDocument.js"

writeFileSync(new URL("../../../docs/profile.md", import.meta.url), renderProfileDocument())
console.log("wrote docs/profile.md")
