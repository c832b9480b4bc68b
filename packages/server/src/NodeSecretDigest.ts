/**
 * The core's secret digest (ApiUser.SecretDigest) on node's own SHA-256: the same lowercase hex as the core's
 * @noble/hashes default, in a fifth of the time (0.24 against 1.25 µs a secret), which is a few percent of an
 * authenticated request's throughput (docs/benchmarks.md, sixth round). The core may not import `node:` modules, so
 * the server hands it this.
 */
import { hash } from "node:crypto"

export const nodeSecretDigest = (secret: string): string => hash("sha256", secret, "hex")
