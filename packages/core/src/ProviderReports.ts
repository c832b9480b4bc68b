/**
 * Progress pushed by the custody provider: the entry point of a receiver of the provider's own callbacks (for a
 * provider whose `progressReporting` is "pushed"). A callback names the request it answers by the request id the
 * relay gave the call (the outbox entry's id, the provider's external id for it); the report then moves the
 * record that request was about through its state table, as events, exactly as a polled report would.
 *
 * The receiver verifies the callback's signature with the provider's own scheme before it calls `apply`: only
 * the embedder knows that scheme and its secret.
 */
import { Effect, Option } from "effect"
import type { AddressReview, TransferProgress } from "./CustodyProvider.js"
import { operation } from "./Operation.js"
import { InvalidRequest } from "./RelayError.js"
import * as Storage from "./Storage.js"
import * as Transactions from "./Transactions.js"
import * as WhitelistedAddresses from "./WhitelistedAddresses.js"

export type ProviderReport =
  | { readonly kind: "transfer"; readonly requestId: string; readonly progress: TransferProgress }
  | { readonly kind: "address"; readonly requestId: string; readonly review: AddressReview }

/** Applies one report to the record its request was about. An unknown request id is refused. */
export const apply = operation("ProviderReports.apply")(function*(report: ProviderReport) {
  // One record, read on its own: a lookup (no transaction).
  const found = yield* Storage.run("lookup", (unit) => unit.getOutboxEntry(report.requestId))
  if (Option.isNone(found)) return yield* InvalidRequest.field("requestId", "names no request the relay made")
  const request = found.value
  if (report.kind === "transfer") {
    if (request.kind !== "submitTransfer") return yield* InvalidRequest.field("requestId", "names no transfer submission")
    return yield* Effect.asVoid(Transactions.applyReportedProgress(request, report.progress))
  }
  if (request.kind !== "registerWhitelistedAddress") {
    return yield* InvalidRequest.field("requestId", "names no address registration")
  }
  return yield* Effect.asVoid(WhitelistedAddresses.applyReportedReview(request, report.review))
})
