import { defineConfig } from "vitest/config"

// One run over every package. Each package's tests live in its own test/ folder.
export default defineConfig({
  resolve: { conditions: ["@custody-relay/source", "import", "default"] },
  ssr: { resolve: { conditions: ["@custody-relay/source", "import", "default"] } },
  test: {
    include: ["packages/*/test/**/*.test.ts", "conformance/test/**/*.test.ts", "examples/test/**/*.test.ts"],
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
