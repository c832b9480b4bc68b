/**
 * Fixtures by isolation, never by reset: every call of `tenant()` makes a fresh client and API user through the
 * control protocol, so examples and property runs (shrinks included) never see each other's data. In black-box
 * mode the tenants are the pre-made credentials of the config file.
 */
import { Decimal } from "decimal.js"
import type { CheckContext } from "./Check.js"
import { CapabilityMissing, type ApiUser } from "./Control.js"
import { allPermissions } from "./Endpoints.js"
import { assetOf, type AssetProfile } from "./Profile.js"
import { RelayClient, type Credential } from "./RelayClient.js"
import { isRecord } from "./Shape.js"
import { formatExchange, type HttpResult } from "./Transport.js"

export interface Tenant {
  /** Undefined in black-box mode, where the kit cannot know it. */
  readonly clientId: string | undefined
  readonly apiUser: ApiUser | undefined
  readonly credential: Credential
  readonly client: RelayClient
}

export interface BlackBoxCredentials {
  readonly primary: Credential
  readonly secondary?: Credential
}

export interface AccountFixture {
  readonly id: string
  readonly assetId: string
  readonly name: string
  readonly workspace: string
  readonly address: string | null
}

export interface WhitelistFixture {
  readonly id: string
  readonly assetType: string
  readonly address: string
}

export interface Fixtures {
  tenant(permissions?: ReadonlyArray<string>): Promise<Tenant>
  /** A second tenant (another client), for the scope matrix. */
  otherTenant(): Promise<Tenant>
  /** Another API user of the same client with the given permissions. */
  user(tenant: Tenant, permissions: ReadonlyArray<string>): Promise<Tenant>
  uniqueName(prefix?: string): string
  asset(preferred?: string): AssetProfile
  pendingAccount(tenant: Tenant, assetId?: string, workspace?: string): Promise<AccountFixture>
  approvedAccount(tenant: Tenant, assetId?: string): Promise<AccountFixture>
  activeAccount(tenant: Tenant, assetId?: string, balance?: string): Promise<AccountFixture>
  whitelist(tenant: Tenant, assetId?: string, status?: "PENDING" | "APPROVED" | "REJECTED" | "ARCHIVED"): Promise<WhitelistFixture>
  /** Initiates an internal transaction between two fresh active accounts; returns its id and accounts. */
  transaction(tenant: Tenant, assetId?: string, amount?: string): Promise<{ readonly id: string; readonly source: AccountFixture; readonly destination: AccountFixture; readonly initiate: HttpResult }>
}

let nameCounter = 0

/** A fixture step the target refused: the kit cannot set up what the check needs (reported as harness-error). */
export class FixtureFailure extends Error {
  constructor(message: string, readonly exchanges: ReadonlyArray<string>) {
    super(message)
    this.name = "FixtureFailure"
  }
}

export const fixturesFor =
  (blackBox: BlackBoxCredentials | undefined) =>
  (context: CheckContext): Fixtures => {
    const step = (what: string, result: HttpResult, statuses: ReadonlyArray<number>): Record<string, unknown> => {
      if (!statuses.includes(result.status) || !isRecord(result.json)) {
        throw new FixtureFailure(`fixture step "${what}" expected ${statuses.join(" or ")}, got ${result.status}`, [formatExchange(result.exchange)])
      }
      return result.json as Record<string, unknown>
    }
    // Implementations may refuse the same address twice for one client, so each tenant walks the sample list.
    const addressesUsed = new Map<string, number>()
    const makeTenant = (credential: Credential, clientId: string | undefined, apiUser: ApiUser | undefined): Tenant => ({
      clientId,
      apiUser,
      credential,
      client: new RelayClient(context.transport, credential)
    })
    const fixtures: Fixtures = {
      async tenant(permissions = allPermissions) {
        if (!context.hasControl) {
          if (blackBox === undefined) throw new CapabilityMissing("control")
          if (permissions.length !== allPermissions.length) throw new CapabilityMissing("control")
          return makeTenant(blackBox.primary, undefined, undefined)
        }
        const { clientId } = await context.control.createClient()
        const apiUser = await context.control.createApiUser(clientId, permissions)
        return makeTenant({ keyId: apiUser.keyId, secret: apiUser.secret }, clientId, apiUser)
      },
      async otherTenant() {
        if (!context.hasControl) {
          if (blackBox?.secondary === undefined) throw new CapabilityMissing("control")
          return makeTenant(blackBox.secondary, undefined, undefined)
        }
        return fixtures.tenant()
      },
      async user(tenant, permissions) {
        if (!context.hasControl || tenant.clientId === undefined) throw new CapabilityMissing("control")
        const apiUser = await context.control.createApiUser(tenant.clientId, permissions)
        return makeTenant({ keyId: apiUser.keyId, secret: apiUser.secret }, tenant.clientId, apiUser)
      },
      uniqueName(prefix = "acct") {
        nameCounter += 1
        // Digits only, so a name never matches an asset id or address in a search filter by accident.
        return `${prefix} ${nameCounter} ${Math.floor(Math.random() * 1e9)}`.slice(0, 40)
      },
      asset(preferred) {
        const found = preferred === undefined ? undefined : assetOf(context.profile, preferred)
        // Order means nothing in a profile: without a preference, the first asset whose fees can be estimated, since
        // most fixtures go on to price or initiate a transfer.
        const asset = found ?? context.profile.assets.find((candidate) => candidate.feeEstimation) ?? context.profile.assets[0]
        if (asset === undefined) throw new Error("the profile declares no asset")
        return asset
      },
      async pendingAccount(tenant, assetId, workspace = "custody") {
        const asset = fixtures.asset(assetId)
        const name = fixtures.uniqueName()
        const body = step("create account", await tenant.client.createAccount({ name, workspace, assetId: asset.assetId }), [201])
        return { id: String(body["id"]), assetId: asset.assetId, name, workspace, address: null }
      },
      async approvedAccount(tenant, assetId) {
        const account = await fixtures.pendingAccount(tenant, assetId)
        step("approve account", await tenant.client.approveAccount(account.id), [200, 201])
        return account
      },
      async activeAccount(tenant, assetId, balance) {
        const account = await fixtures.approvedAccount(tenant, assetId)
        const activated = await context.control.activateAccount(account.id)
        if (balance !== undefined && new Decimal(balance).gt(0)) await context.control.creditAccount(account.id, balance)
        return { ...account, address: activated.address }
      },
      async whitelist(tenant, assetId, status = "APPROVED") {
        const asset = fixtures.asset(assetId)
        const key = `${tenant.credential.keyId} ${asset.assetId}`
        const used = addressesUsed.get(key) ?? 0
        const address = asset.sampleAddresses.valid[used]
        if (address === undefined) {
          throw new FixtureFailure(`the profile offers ${asset.sampleAddresses.valid.length} valid ${asset.assetId} address(es); this check needs more for one client (see docs/control-protocol.md)`, [])
        }
        addressesUsed.set(key, used + 1)
        const body = step(
          "create whitelisted address",
          await tenant.client.createWhitelist({ name: fixtures.uniqueName("wl"), address, assetType: asset.assetId }),
          [200, 201]
        )
        const id = String(body["id"])
        if (status !== "PENDING") await context.control.setWhitelistStatus(id, status)
        return { id, assetType: asset.assetId, address }
      },
      async transaction(tenant, assetId, amount = "1") {
        const asset = fixtures.asset(assetId)
        const source = await fixtures.activeAccount(tenant, asset.assetId, "1000")
        const destination = await fixtures.activeAccount(tenant, asset.assetId)
        const initiate = await tenant.client.initiate({
          sourceAccountId: source.id,
          destinationId: destination.id,
          destinationType: "internal",
          amount,
          assetType: asset.assetId
        })
        const body = step("initiate transaction", initiate, [201])
        return { id: String(body["id"]), source, destination, initiate }
      }
    }
    return fixtures
  }
