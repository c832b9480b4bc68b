/** The tag of an Effect's failure, for asserting which refusal an operation gave. */
import { Exit } from "effect"

export const failureTag = <A, E extends { readonly _tag: string }>(exit: Exit.Exit<A, E>): string =>
  Exit.isFailure(exit) ? exit.cause.reasons.map((r) => (r._tag === "Fail" ? r.error._tag : r._tag)).join(",") : "success"

export const failureOf = <A, E>(exit: Exit.Exit<A, E>): E | undefined => {
  if (!Exit.isFailure(exit)) return undefined
  for (const reason of exit.cause.reasons) if (reason._tag === "Fail") return reason.error
  return undefined
}
