#!/usr/bin/env bash
# The OpenAPI document the handler serves, linted by Redocly's recommended rules: any error or warning fails.
set -euo pipefail
cd "$(dirname "$0")/.."
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
npx --no-install tsx --conditions=@custody-relay/source packages/http/scripts/writeOpenApi.ts "$out/openapi.json"
npx --no-install redocly lint "$out/openapi.json" --format=stylish >"$out/lint.txt" 2>&1 || true
if grep -qE "^\s+[0-9]+:[0-9]+\s+(error|warning)" "$out/lint.txt" || ! grep -q "Your API description is valid" "$out/lint.txt"; then
  grep -v "npm warn" "$out/lint.txt"
  echo "check-openapi: Redocly found problems in the OpenAPI document"
  exit 1
fi
echo "check-openapi: the OpenAPI document passes Redocly's recommended rules with no warning"
