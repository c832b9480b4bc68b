/**
 * The dependency rule, checked in CI: the domain imports no adapter, and the conformance kit knows nothing of ours
 * but the wire format.
 */
module.exports = {
  forbidden: [
    {
      name: "core-imports-no-adapter",
      comment: "packages/core is the domain: no HTTP server, SQL driver, node:http or adapter package",
      severity: "error",
      from: { path: "^packages/core/src" },
      to: {
        path: "^packages/(http|storage-sql|server)|node_modules/(kysely|better-sqlite3|pg|hono|express|fastify)/|^(node:)?(http|https|http2|net|fs|child_process)$"
      }
    },
    {
      name: "core-knows-no-node-builtins",
      comment: "the core runs on any JavaScript runtime: Web Crypto and @noble/hashes, never node: modules",
      severity: "error",
      from: { path: "^packages/core/src" },
      to: { dependencyTypes: ["core"] }
    },
    {
      name: "adapters-do-not-import-each-other",
      severity: "error",
      from: { path: "^packages/(http|storage-sql)/src" },
      to: { path: "^packages/(http|storage-sql|server)/src", pathNot: "^packages/$1/src" }
    },
    {
      name: "conformance-imports-none-of-ours",
      comment: "the kit's model of the interface is its own",
      severity: "error",
      from: { path: "^conformance/src" },
      to: { path: "^packages/|node_modules/@custody-relay/" }
    },
    {
      name: "no-internal-imports-across-packages",
      comment: "packages use each other through their public entry only",
      severity: "error",
      from: { path: "^packages/([^/]+)/src" },
      to: { path: "^packages/([^/]+)/src", pathNot: "^packages/$1/src" }
    }
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    tsPreCompilationDeps: true,
    exclude: { path: "(^|/)(dist|build|test|bench)/" },
    enhancedResolveOptions: { exportsFields: ["exports"], conditionNames: ["import", "types", "default"] }
  }
}
