/** Every check of the kit, in run order. Ids are stable and never reused. */
import type { Check } from "../Check.js"
import { accountChecks } from "./accounts.js"
import { approvalChecks } from "./approvals.js"
import { authChecks, secretNotLogged } from "./auth.js"
import { concurrencyChecks } from "./concurrency.js"
import { generalChecks } from "./general.js"
import { limitChecks } from "./limits.js"
import { modelChecks } from "./model.js"
import { paginationChecks } from "./pagination.js"
import { scopeChecks } from "./scope.js"
import { transactionChecks } from "./transactions.js"
import { whitelistChecks } from "./whitelist.js"

export const allChecks: ReadonlyArray<Check> = [
  ...generalChecks,
  ...authChecks,
  ...scopeChecks,
  ...paginationChecks,
  ...accountChecks,
  ...whitelistChecks,
  ...transactionChecks,
  ...approvalChecks,
  ...modelChecks,
  ...concurrencyChecks,
  ...limitChecks,
  // Last: it scans the log lines of the whole run.
  secretNotLogged
]
