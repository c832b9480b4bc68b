import { availableParallelism } from "node:os"
import { defineConfig } from "vitest/config"

// One run over every package. Each package's tests live in its own test/ folder; test/ holds those about all of them.
// The source condition comes first; "import"/"require" are left to Vite, which adds the right one per request: a
// listed "import" would also apply to require() inside CommonJS packages (pg requiring pg-pool got its ESM wrapper).
const conditions = ["@custody-relay/source", "module", "node", "development|production"]
export default defineConfig({
  resolve: { conditions },
  ssr: { resolve: { conditions } },
  test: {
    include: ["test/**/*.test.ts", "packages/*/test/**/*.test.ts", "conformance/test/**/*.test.ts", "examples/test/**/*.test.ts", "examples/*.test.ts"],
    // Most of the slowest files wait on child processes (servers, crash proofs, packed tarballs) and on PostgreSQL
    // rather than compute, so they overlap well: on a 2-core VM vitest's default (one worker per core but one) ran the
    // files one at a time, 578 s with coverage; 3 workers took 404 s, 4 took 386 s.
    maxWorkers: Math.max(3, availableParallelism() - 1),
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
