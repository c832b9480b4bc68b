import { writeFileSync } from "node:fs"
import { renderLifecycleDocument } from "./lifecycleDocument.js"
import { renderProfileDocument } from "./profileDocument.js"

writeFileSync(new URL("../../../docs/profile.md", import.meta.url), renderProfileDocument())
console.log("wrote docs/profile.md")
writeFileSync(new URL("../../../docs/lifecycle.md", import.meta.url), renderLifecycleDocument())
console.log("wrote docs/lifecycle.md")
