/**
 * Administration an embedder needs and the interface does not expose: clients, API users and their credentials,
 * revocation and permission changes. These run with the embedder's authority, not a principal's; expose them
 * only to your back office.
 */
import { Effect, Option, Redacted, Result, Schema } from "effect"
import { requireUuid } from "./Accounts.js"
import * as ApiUser from "./ApiUser.js"
import type { Client } from "./Client.js"
import * as DomainEvent from "./DomainEvent.js"
import { ApiUserId, ClientId, Ids } from "./Ids.js"
import { operation } from "./Operation.js"
import * as Permission from "./Permission.js"
import { MAX_LIMIT, MAX_WINDOW_SECONDS, RateLimitPolicyInput, type RateLimitPolicy } from "./RateLimiter.js"
import { InvalidRequest, NotFound } from "./RelayError.js"
import * as Settings from "./Settings.js"
import * as Storage from "./Storage.js"
import { Text } from "./Text.js"
import * as Timestamp from "./Timestamp.js"

/**
 * A client's or an API user's name as an operator gives it: shown to the client (an API user's name is the actor in
 * a transaction's approvals), so held to the rules of text a client writes (Text), at most 100 characters.
 */
const Name = Text(1, 100)
const decodeName = Schema.decodeUnknownResult(Name)

const requireName = (name: unknown) =>
  Result.isSuccess(decodeName(name))
    ? Effect.succeed(name as string)
    : Effect.fail(InvalidRequest.field("name", "must be 1 to 100 characters of text without control or bidirectional override characters"))

/** The permissions to grant, each once, or a 400 naming the first unknown one. */
const requirePermissions = (names: ReadonlyArray<Permission.Permission>) => {
  const refusal = Permission.refusalOf(names)
  return refusal === undefined ? Effect.succeed([...new Set(names)]) : Effect.fail(InvalidRequest.field("permissions", refusal))
}

const decodeRateLimit = Schema.decodeUnknownResult(RateLimitPolicyInput)

/** A request budget as RateLimitPolicyInput has it (only its two numbers kept), or a 400 naming `rateLimit`. */
const requireRateLimit = (policy: unknown): Effect.Effect<RateLimitPolicy, InvalidRequest> => {
  const decoded = decodeRateLimit(policy, { onExcessProperty: "ignore" })
  return Result.isSuccess(decoded)
    ? Effect.succeed({ limit: decoded.success.limit, windowSeconds: decoded.success.windowSeconds })
    : Effect.fail(InvalidRequest.field("rateLimit", `limit must be a whole number from 1 to ${MAX_LIMIT} and windowSeconds one from 1 to ${MAX_WINDOW_SECONDS}`))
}

export const createClient = operation("Administration.createClient")(function*(name?: string) {
  if (name !== undefined) yield* requireName(name)
  const id = ClientId.make(yield* (yield* Ids).next)
  const client: Client = { id, name: name ?? `client-${id.slice(-12)}`, createdAt: yield* Timestamp.now }
  yield* Storage.run("write", (unit) =>
    Effect.andThen(
      unit.insertClient(client),
      DomainEvent.append(unit, {
        type: "client.created",
        clientId: id,
        entityId: id,
        actor: DomainEvent.operator,
        data: { name: client.name }
      })
    ))
  return client
})

/** The client with this id, for administration: NotFound when there is none. */
export const getClient = operation("Administration.getClient")(function*(id: string) {
  const clientId = ClientId.make(yield* requireUuid("clientId", id))
  const found = yield* Storage.run("read", (unit) => unit.getClient(clientId))
  if (Option.isNone(found)) return yield* new NotFound({ resource: "client", id: clientId })
  return found.value
})

export interface NewApiUser {
  /** Null makes a credential that is not client-scoped (it is refused on every client operation). */
  readonly clientId: string | null
  readonly permissions: ReadonlyArray<Permission.Permission>
  /** The actor name shown in a transaction's approvals; defaults to one derived from the id. */
  readonly name?: string
  /** The credential's own request budget; when absent, the one set for new API users, else the deployment's. */
  readonly rateLimit?: RateLimitPolicy
}

/** Creates an API user and returns its credential: the only time the secret exists outside the caller's hands. */
export const createApiUser = operation("Administration.createApiUser")(function*(input: NewApiUser) {
  if (typeof input !== "object" || input === null || Array.isArray(input)) {
    return yield* InvalidRequest.field("input", "must be an object with clientId and permissions")
  }
  const clientId = input.clientId === null ? null : ClientId.make(yield* requireUuid("clientId", input.clientId))
  const permissions = yield* requirePermissions(input.permissions)
  if (input.name !== undefined) yield* requireName(input.name)
  const rateLimit = input.rateLimit === undefined ? undefined : yield* requireRateLimit(input.rateLimit)
  const id = ApiUserId.make(yield* (yield* Ids).next)
  const credential = yield* ApiUser.generateCredential
  const secretHash = (yield* ApiUser.SecretDigest)(Redacted.value(credential.secret))
  const now = yield* Timestamp.now
  yield* Storage.run("write", (unit) => createApiUserIn(unit, { ...input, permissions, ...(rateLimit === undefined ? {} : { rateLimit }) }, clientId, id, credential.keyId, secretHash, now))
  return { apiUserId: id, keyId: credential.keyId, secret: credential.secret } satisfies ApiUser.IssuedCredential
})

/** An API user's unit of work: its client checked, the user stored with its hash (never the secret), the event appended. */
const createApiUserIn = Effect.fnUntraced(function*(
  unit: Storage.StorageUnit,
  input: NewApiUser,
  clientId: ClientId | null,
  id: ApiUserId,
  keyId: string,
  secretHash: string,
  now: Timestamp.Timestamp
) {
  const rateLimit = input.rateLimit ?? Option.getOrUndefined(Option.map(
    yield* unit.getSetting(Settings.RATE_LIMIT_FOR_NEW_API_USERS),
    (text) => JSON.parse(text) as RateLimitPolicy
  ))
  if (clientId !== null && Option.isNone(yield* unit.getClient(clientId))) {
    return yield* new NotFound({ resource: "client", id: clientId })
  }
  const name = input.name ?? `api-user-${id.slice(-12)}`
  const permissions = input.permissions
  yield* DomainEvent.append(unit, {
    type: "api_user.created",
    clientId,
    entityId: id,
    actor: DomainEvent.operator,
    data: { keyId, name, permissions }
  })
  yield* unit.insertApiUser({
    id,
    clientId,
    name,
    keyId,
    secretHash,
    permissions,
    ...(rateLimit === undefined ? {} : { rateLimit }),
    revokedAt: null,
    createdAt: now,
    updatedAt: now
  })
})

/** The event a change of an API user appends: what changed, never the secret. */
const changeEvent = (before: ApiUser.ApiUser, after: ApiUser.ApiUser) =>
  after.revokedAt !== before.revokedAt
    ? { type: "api_user.revoked" as const, data: {} }
    : after.secretHash !== before.secretHash
    ? { type: "api_user.secret_rotated" as const, data: {} }
    : !samePolicy(after.rateLimit, before.rateLimit)
    ? { type: "api_user.rate_limit_changed" as const, data: { before: before.rateLimit ?? null, after: after.rateLimit ?? null } }
    : { type: "api_user.permissions_changed" as const, data: { before: before.permissions, after: after.permissions } }

const samePolicy = (a: RateLimitPolicy | undefined, b: RateLimitPolicy | undefined) =>
  a === b || (a !== undefined && b !== undefined && a.limit === b.limit && a.windowSeconds === b.windowSeconds)

const updateApiUser = Effect.fnUntraced(function*(id: string, change: (user: ApiUser.ApiUser, now: Timestamp.Timestamp) => ApiUser.ApiUser) {
  id = yield* requireUuid("apiUserId", id)
  const now = yield* Timestamp.now
  return yield* Storage.run("write", (unit) => updateApiUserIn(unit, id, change, now))
})

const updateApiUserIn = Effect.fnUntraced(function*(
  unit: Storage.StorageUnit,
  id: string,
  change: (user: ApiUser.ApiUser, now: Timestamp.Timestamp) => ApiUser.ApiUser,
  now: Timestamp.Timestamp
) {
  const found = yield* unit.getApiUser(ApiUserId.make(id))
  if (Option.isNone(found)) return yield* new NotFound({ resource: "api_user", id })
  const updated = change(found.value, now)
  if (updated === found.value) return updated
  yield* unit.updateApiUser(updated)
  yield* DomainEvent.append(unit, {
    ...changeEvent(found.value, updated),
    clientId: updated.clientId,
    entityId: updated.id,
    actor: DomainEvent.operator
  })
  return updated
})

/**
 * The request budget API users created from now on get (LIM-RATE-2: "applies to API users created afterwards");
 * kept with the data, so every node creates them alike. Existing API users keep theirs.
 */
export const setRateLimitForNewApiUsers = operation("Administration.setRateLimitForNewApiUsers")(function*(
  given: RateLimitPolicy
) {
  const policy = yield* requireRateLimit(given)
  yield* Storage.run("write", (unit) => unit.putSetting(Settings.RATE_LIMIT_FOR_NEW_API_USERS, JSON.stringify(policy)))
  return policy
})

/**
 * Gives an API user a request budget of its own (LIM-RATE-2), or, with null, returns it to the one every API user
 * without its own gets (the deployment's; an embedder's per-key option in the HTTP handler comes before either).
 * Every node counts the user's next request against it (the user is read again once it changes, as for permissions:
 * AUTH-PERM-2). A window of the same length keeps its count, so a lower limit refuses at once what is over it. One of
 * another length counts in windows of its own; whether the first of them starts from what the old window counted
 * depends on the store (RateLimiter), so for that one window the budget is approximate. Setting the budget the user
 * already has writes nothing.
 */
export const setRateLimit = operation("Administration.setRateLimit")(function*(id: string, given: RateLimitPolicy | null) {
  const rateLimit = given === null ? undefined : yield* requireRateLimit(given)
  return yield* updateApiUser(id, (user, now) => {
    if (samePolicy(user.rateLimit, rateLimit)) return user
    const { rateLimit: _, ...rest } = user
    return { ...rest, ...(rateLimit === undefined ? {} : { rateLimit }), updatedAt: now }
  })
})

/** Revokes a credential: from the next request on it is refused with 401. Revoking twice changes nothing. */
export const revokeApiUser = operation("Administration.revokeApiUser")(function*(id: string) {
  return yield* updateApiUser(id, (user, now) => (user.revokedAt === null ? { ...user, revokedAt: now, updatedAt: now } : user))
})

/** Replaces an API user's permissions; the next request already sees them (AUTH-PERM-2). */
export const setPermissions = operation("Administration.setPermissions")(
  function*(id: string, permissions: ReadonlyArray<Permission.Permission>) {
    const granted = yield* requirePermissions(permissions)
    return yield* updateApiUser(id, (user, now) => ({ ...user, permissions: granted, updatedAt: now }))
  }
)

/**
 * Replaces an API user's secret, keeping its key id: the new secret is returned once, here, and the old one is
 * refused from the next request on (only the hash is stored, so there is nothing to recover). A revoked API user
 * cannot be given a new secret.
 */
export const rotateSecret = operation("Administration.rotateSecret")(function*(id: string) {
  const { secret } = yield* ApiUser.generateCredential
  const secretHash = (yield* ApiUser.SecretDigest)(Redacted.value(secret))
  // A revoked user is left as it is (nothing is written), and refused below.
  const updated = yield* updateApiUser(id, (user, now) => user.revokedAt !== null ? user : { ...user, secretHash, updatedAt: now })
  if (updated.revokedAt !== null) return yield* InvalidRequest.field("apiUserId", "the API user is revoked; create a new one")
  return { apiUserId: updated.id, keyId: updated.keyId, secret } satisfies ApiUser.IssuedCredential
})

/** An API user as an operator sees it: everything but the secret's hash. */
export const apiUserView = ({ secretHash: _, ...user }: ApiUser.ApiUser) => user
export type ApiUserView = ReturnType<typeof apiUserView>

/** Every client, oldest first. */
export const listClients = operation("Administration.listClients")(function*() {
  return yield* Storage.run("read", (unit) => unit.listClients())
})

/** API users, oldest first; of one client when a client id is given. */
export const listApiUsers = operation("Administration.listApiUsers")(function*(clientId?: string) {
  const scope = clientId === undefined ? undefined : ClientId.make(yield* requireUuid("clientId", clientId))
  const users = yield* Storage.run("read", (unit) => unit.listApiUsers(scope))
  return users.map(apiUserView)
})

/** The API user with this id or key id (the key id is what an operator has at hand): NotFound otherwise. */
export const findApiUser = operation("Administration.findApiUser")(function*(idOrKeyId: string) {
  if (typeof idOrKeyId !== "string") return yield* InvalidRequest.field("apiUserId", "must be an API user id or a key id")
  const found = idOrKeyId.startsWith(ApiUser.KEY_ID_PREFIX)
    ? yield* Storage.run("read", (unit) => unit.findApiUserByKeyId(idOrKeyId))
    : yield* Storage.run("read", (unit) => Effect.flatMap(requireUuid("apiUserId", idOrKeyId), (id) => unit.getApiUser(ApiUserId.make(id))))
  if (Option.isNone(found)) return yield* new NotFound({ resource: "api_user", id: idOrKeyId })
  return apiUserView(found.value)
})
