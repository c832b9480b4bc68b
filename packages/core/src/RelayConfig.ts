/**
 * Deployment choices the interface leaves open (our profile), with defaults an embedder can override by
 * providing the reference: how many approvals a new account's transactions need, and whether an approved account
 * is activated (given its deposit address) at once or by a later provider step (ACC-ACTIVE-1).
 */
import { Context } from "effect"

export interface RelayConfigShape {
  /** Distinct approvers a transaction from a new account needs; 0 sends it to the provider at once. */
  readonly defaultRequiredApprovals: number
  /** Activate an account in the same unit of work that approves it. */
  readonly activateOnApproval: boolean
}

export const RelayConfig = Context.Reference<RelayConfigShape>("@custody-relay/core/RelayConfig", {
  defaultValue: () => ({ defaultRequiredApprovals: 1, activateOnApproval: false })
})
