/**
 * The storage contract against every implementation this run wants (see Dialects). PostgreSQL runs only with
 * RELAY_TEST_PG_URL; without it the suite is skipped and says why.
 */
import { describe } from "vitest"
import { dialectNames, isWanted, layers, postgresSkipReason } from "./Dialects.js"
import * as StorageContract from "./StorageContract.js"

for (const name of dialectNames) {
  describe.skipIf(!isWanted(name) || (name === "postgres" && postgresSkipReason !== undefined))(`Storage contract: ${name}`, () => {
    StorageContract.suite(name, layers[name])
  })
}
