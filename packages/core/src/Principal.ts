/**
 * Who is calling: an authenticated API user, with the client it acts for and its permissions. `authorize` is the
 * one gate every client operation passes: the operation's permission (AUTH-PERM-1), then client scope
 * (AUTH-SCOPE-1). `owns` is the one scope check on records read by id (SCOPE-1).
 */
import { Effect, Option } from "effect"
import type { ApiUserId, ClientId } from "./Ids.js"
import { type Operation, type Permission, requiredPermission } from "./Permission.js"
import type { RateLimitPolicy } from "./RateLimiter.js"
import { CredentialNotClientScoped, NotFound, PermissionDenied } from "./RelayError.js"

export interface Principal {
  readonly apiUserId: ApiUserId
  readonly clientId: ClientId | null
  readonly name: string
  readonly keyId: string
  readonly permissions: ReadonlyArray<Permission>
  /** The credential's own request budget, if it has one (see ApiUser.rateLimit). */
  readonly rateLimit?: RateLimitPolicy
}

export interface ClientPrincipal extends Principal {
  readonly clientId: ClientId
}

export const authorize = (
  principal: Principal,
  operation: Operation
): Effect.Effect<ClientPrincipal, PermissionDenied | CredentialNotClientScoped> => {
  const permission = requiredPermission[operation]
  if (!principal.permissions.includes(permission)) return Effect.fail(PermissionDenied.of(permission))
  if (principal.clientId === null) return Effect.fail(new CredentialNotClientScoped())
  return Effect.succeed(principal as ClientPrincipal)
}

export const owns = (principal: ClientPrincipal, record: { readonly clientId: ClientId }): boolean =>
  record.clientId === principal.clientId

/** The caller's record, or NotFound whether it is absent or another client's: the two look the same (SCOPE-1). */
export const requireOwned = <A extends { readonly clientId: ClientId }>(
  principal: ClientPrincipal,
  resource: NotFound["resource"],
  id: string
) =>
(found: Option.Option<A>): Effect.Effect<A, NotFound> =>
  NotFound.unlessFound<A>(resource, id)(Option.filter(found, (record) => owns(principal, record)))
