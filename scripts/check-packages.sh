#!/usr/bin/env bash
# What a consumer installs, checked from the packed tarballs (after `pnpm build`): publint's rules, the types an
# ESM consumer resolves (arethetypeswrong, esm-only profile), every export target present in the tarball, no export
# condition that points into unshipped sources, a README in each.
set -euo pipefail
cd "$(dirname "$0")/.."
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
status=0
for dir in packages/core packages/http packages/storage-sql packages/server conformance; do
  npx --no-install publint "$dir" --pack pnpm --strict >/dev/null || { echo "check-packages: publint refused $dir"; status=1; }
  (cd "$dir" && pnpm pack --pack-destination "$out" >/dev/null)
  tarball="$(ls -t "$out"/*.tgz | head -1)"
  # Types as an ESM consumer resolves them (node16 from ESM, bundler); CommonJS is out of scope by design.
  npx --no-install attw "$tarball" --profile esm-only --format ascii >"$out/attw.txt" 2>&1 || { echo "check-packages: attw refused $dir"; grep -v "npm warn" "$out/attw.txt"; status=1; }
  node -e '
    const { execFileSync } = require("node:child_process")
    const [tarball, dir] = process.argv.slice(1)
    const files = new Set(execFileSync("tar", ["-tzf", tarball], { encoding: "utf8" }).trim().split("\n"))
    const manifest = JSON.parse(execFileSync("tar", ["-xzOf", tarball, "package/package.json"], { encoding: "utf8" }))
    const problems = []
    const visit = (value, where) => {
      if (typeof value === "string") {
        const path = "package/" + value.replace(/^\.\//, "")
        // A pattern target ("./dist/*.d.ts") must match at least one packed file.
        const pattern = new RegExp("^" + path.split("*").map((part) => part.replace(/[.+?^${}()|[\]\\]/g, "\\$&")).join("[^/]+") + "$")
        const present = path.includes("*") ? [...files].some((file) => pattern.test(file)) : files.has(path)
        if (!present) problems.push(`${where} -> ${value} is not in the tarball`)
      } else if (value && typeof value === "object") {
        for (const [key, inner] of Object.entries(value)) {
          if (key === "@custody-relay/source") problems.push(`${where} names the source condition`)
          visit(inner, `${where}.${key}`)
        }
      }
    }
    visit(manifest.exports, "exports")
    for (const [name, target] of Object.entries(manifest.bin ?? {})) visit(target, `bin.${name}`)
    if (!files.has("package/README.md")) problems.push("no README.md")
    for (const problem of problems) console.log(`check-packages: ${dir}: ${problem}`)
    process.exit(problems.length === 0 ? 0 : 1)
  ' "$tarball" "$dir" || status=1
done
[ "$status" -eq 0 ] && echo "check-packages: 5 packages fine"
exit "$status"
