import { defineConfig } from "vitest/config"

// One run over every package. Each package's tests live in its own test/ folder.
// The source condition comes first; "import"/"require" are left to Vite, which adds the right one per request: a
// listed "import" would also apply to require() inside CommonJS packages (pg requiring pg-pool got its ESM wrapper).
const conditions = ["@custody-relay/source", "module", "node", "development|production"]
export default defineConfig({
  resolve: { conditions },
  ssr: { resolve: { conditions } },
  test: {
    include: ["packages/*/test/**/*.test.ts", "conformance/test/**/*.test.ts", "examples/test/**/*.test.ts", "examples/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    coverage: {
      provider: "v8",
      include: ["packages/core/src/**/*.ts"],
      reporter: ["text-summary", "text"],
      thresholds: { lines: 90 }
    }
  }
})
