/**
 * Chain: the address format of each supported network (mainnet only).
 *
 * `isValidAddress` checks the encoding and its checksum, not just the shape: a one-character typo in a
 * whitelisted address is refused before any funds can be sent to it. `addressFromSeed` derives a
 * deterministic, valid address from bytes; the in-memory custody provider uses it to hand out deposit
 * addresses. It is not key derivation: nobody holds a key for these addresses.
 *
 * Formats:
 * - Bitcoin: base58check P2PKH (version 0x00) and P2SH (0x05); native segwit with hrp `bc` (BIP-173, BIP-350).
 * - Litecoin: base58check versions 0x30 (`L`), 0x32 (`M`) and 0x05 (`3`); native segwit with hrp `ltc`.
 * - Ethereum: `0x` and 40 hex digits; mixed case must carry a valid EIP-55 checksum.
 * - Solana: base58 of a 32-byte public key.
 */
import { sha256 } from "@noble/hashes/sha2.js"
import { keccak_256 } from "@noble/hashes/sha3.js"
import { bytesToHex, utf8ToBytes } from "@noble/hashes/utils.js"
import { base58, bech32, bech32m, createBase58check } from "@scure/base"
import type { Bech32, Bech32Decoded } from "@scure/base"

export interface Chain {
  readonly chainType: string
  isValidAddress(address: string): boolean
  /**
   * Every valid way to write this (valid) address, itself included: bech32 is valid in all lower or all upper
   * case, and an Ethereum address in lower case, upper case or its EIP-55 mixed case; base58 is case-sensitive, so
   * it has one. Whitelisting compares addresses through it, so one address is never two entries.
   */
  spellingsOf(address: string): ReadonlyArray<string>
  addressFromSeed(seed: Uint8Array): string
}

const base58check = createBase58check(sha256)

// Base58 decoding is quadratic in the input length; anything longer than the longest legitimate address is
// refused before decoding so a hostile string costs nothing.
const MAX_BASE58CHECK_LENGTH = 35
const MAX_SOLANA_LENGTH = 44
// BIP-173 caps a segwit address at 90 characters.
const MAX_SEGWIT_LENGTH = 90

/** The version byte of a base58check address with a 20-byte hash, or undefined when it is not one. */
const base58checkVersion = (address: string): number | undefined => {
  if (address.length > MAX_BASE58CHECK_LENGTH) return undefined
  let payload: Uint8Array
  try {
    payload = base58check.decode(address)
  } catch {
    return undefined
  }
  return payload.length === 21 ? payload[0] : undefined
}

const decodeWith = (coder: Bech32, address: string): Bech32Decoded | undefined => {
  try {
    return coder.decode(address, MAX_SEGWIT_LENGTH)
  } catch {
    return undefined
  }
}

/**
 * A native segwit address for `hrp`, per BIP-173 and BIP-350: witness version 0 uses bech32 with a 20- or
 * 32-byte program; versions 1 to 16 use bech32m with a 2- to 40-byte program. Mixed case, non-zero or excess
 * padding and the wrong checksum variant for the version are refused.
 *
 * Versions above 1 and version 1 programs other than 32 bytes (taproot) are accepted as BIP-350 specifies,
 * since they are valid addresses for future soft forks.
 */
const isValidSegwitAddress = (hrp: string, address: string): boolean => {
  const asBech32 = decodeWith(bech32, address)
  const decoded = asBech32 ?? decodeWith(bech32m, address)
  if (decoded === undefined || decoded.prefix !== hrp) return false
  const [version, ...data] = decoded.words
  if (version === undefined || version > 16) return false
  const program = bech32.fromWordsUnsafe(data)
  if (program === undefined || program.length < 2 || program.length > 40) return false
  if (version === 0) return asBech32 !== undefined && (program.length === 20 || program.length === 32)
  return asBech32 === undefined
}

/** A P2WPKH-shaped address whose 20-byte program is the first 20 bytes of sha256(seed). */
const segwitV0AddressFromSeed = (hrp: string, seed: Uint8Array): string =>
  bech32.encode(hrp, [0, ...bech32.toWords(sha256(seed).subarray(0, 20))])

const base58checkOrSegwit = (versions: ReadonlyArray<number>, hrp: string) => (address: string): boolean => {
  const version = base58checkVersion(address)
  return version !== undefined ? versions.includes(version) : isValidSegwitAddress(hrp, address)
}

const base58checkOrSegwitSpellings = (address: string): ReadonlyArray<string> =>
  base58checkVersion(address) === undefined ? distinct([address.toLowerCase(), address.toUpperCase()]) : [address]

const distinct = (spellings: ReadonlyArray<string>): ReadonlyArray<string> => [...new Set(spellings)]

export const Bitcoin: Chain = {
  chainType: "BITCOIN",
  isValidAddress: base58checkOrSegwit([0x00, 0x05], "bc"),
  spellingsOf: base58checkOrSegwitSpellings,
  addressFromSeed: (seed) => segwitV0AddressFromSeed("bc", seed)
}

export const Litecoin: Chain = {
  chainType: "LITECOIN",
  isValidAddress: base58checkOrSegwit([0x30, 0x32, 0x05], "ltc"),
  spellingsOf: base58checkOrSegwitSpellings,
  addressFromSeed: (seed) => segwitV0AddressFromSeed("ltc", seed)
}

const ETHEREUM_ADDRESS = /^0x[0-9a-fA-F]{40}$/

/** EIP-55: a hex letter is upper case when the matching nibble of keccak256(lowercase hex) is 8 or more. */
const eip55 = (lowerHex: string): string => {
  const hash = bytesToHex(keccak_256(utf8ToBytes(lowerHex)))
  let out = "0x"
  for (let i = 0; i < lowerHex.length; i++) {
    const char = lowerHex.charAt(i)
    out += parseInt(hash.charAt(i), 16) >= 8 ? char.toUpperCase() : char
  }
  return out
}

export const Ethereum: Chain = {
  chainType: "ETHEREUM",
  isValidAddress: (address) => {
    if (!ETHEREUM_ADDRESS.test(address)) return false
    const hex = address.slice(2)
    const lower = hex.toLowerCase()
    // A single-case address carries no checksum; EIP-55 leaves it valid.
    if (hex === lower || hex === hex.toUpperCase()) return true
    return eip55(lower) === address
  },
  spellingsOf: (address) => {
    const lower = address.slice(2).toLowerCase()
    return distinct([`0x${lower}`, `0x${lower.toUpperCase()}`, eip55(lower)])
  },
  addressFromSeed: (seed) => eip55(bytesToHex(keccak_256(seed).subarray(12)))
}

export const Solana: Chain = {
  chainType: "SOLANA",
  isValidAddress: (address) => {
    if (address.length > MAX_SOLANA_LENGTH) return false
    try {
      return base58.decode(address).length === 32
    } catch {
      return false
    }
  },
  spellingsOf: (address) => [address],
  addressFromSeed: (seed) => base58.encode(sha256(seed))
}
