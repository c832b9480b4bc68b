import { describe, expect, it } from "@effect/vitest"
import { bech32, bech32m } from "@scure/base"
import fc from "fast-check"
import { Bitcoin, Ethereum, Litecoin, Solana } from "../src/Chain.js"
import type { Chain } from "../src/Chain.js"

const seed = fc.uint8Array({ minLength: 0, maxLength: 64 })
const BECH32_CHARSET = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"

const flipCase = (char: string): string => (char === char.toUpperCase() ? char.toLowerCase() : char.toUpperCase())

describe("Chain.Bitcoin (WL-CREATE-1: address valid for assetType)", () => {
  // BIP-173 and BIP-350 mainnet vectors (https://github.com/bitcoin/bips).
  const valid = [
    "BC1QW508D6QEJXTDG4Y5R3ZARVARY0C5XW7KV8F3T4",
    "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4",
    "bc1qrp33g0q5c5txsp9arysrx4k6zdkfs4nce4xj0gdcccefvpysxf3qccfmv3",
    "bc1qqqqqp399et2xygdj5xreqhjjvcmzhxw4aywxecjdzew6hylgvses5wp4dt",
    "bc1pw508d6qejxtdg4y5r3zarvary0c5xw7kw508d6qejxtdg4y5r3zarvary0c5xw7kt5nd6y",
    "BC1SW50QGDZ25J",
    "bc1zw508d6qejxtdg4y5r3zarvaryvaxxpcs",
    "bc1pqqqqp399et2xygdj5xreqhjjvcmzhxw4aywxecjdzew6hylgvses7epu4h",
    "bc1p0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7vqzk5jj0",
    "BC1P0XLXVLHEMJA6C4DQV22UAPCTQUPFHLXM9H8Z3K2E72Q4K9HCZ7VQZK5JJ0"
  ]

  const invalid: ReadonlyArray<readonly [string, string]> = [
    ["tc1qw508d6qejxtdg4y5r3zarvary0c5xw7kg3g4ty", "invalid human-readable part"],
    ["tb1qrp33g0q5c5txsp9arysrx4k6zdkfs4nce4xj0gdcccefvpysxf3q0sl5k7", "testnet hrp"],
    ["bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t5", "invalid checksum"],
    ["BC13W508D6QEJXTDG4Y5R3ZARVARY0C5XW7KN40WF2", "invalid witness version"],
    ["bc1rw5uspcuh", "invalid program length"],
    ["bc10w508d6qejxtdg4y5r3zarvary0c5xw7kw508d6qejxtdg4y5r3zarvary0c5xw7kw5rljs90", "invalid program length"],
    ["BC1QR508D6QEJXTDG4Y5R3ZARVARYV98GJ9P", "invalid program length for witness version 0"],
    ["bc1zw508d6qejxtdg4y5r3zarvaryvqyzf3du", "zero padding of more than 4 bits"],
    ["bc1gmk9yu", "empty data section"],
    ["bc1QW508D6QEJXTDG4Y5R3ZARVARY0C5XW7KV8F3T4", "mixed case"],
    ["bc1p0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7vqh2y7hd", "bech32 instead of bech32m for v1"],
    ["BC1S0XLXVLHEMJA6C4DQV22UAPCTQUPFHLXM9H8Z3K2E72Q4K9HCZ7VQ54WELL", "bech32m instead of bech32 for v0"],
    ["bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kemeawh", "bech32m instead of bech32 for v0"],
    ["bc1p38j9r5y49hruaue7wxjce0updqjuyyx0kh56v8s25huc6995vvpql3jow4", "invalid character in checksum"],
    ["BC130XLXVLHEMJA6C4DQV22UAPCTQUPFHLXM9H8Z3K2E72Q4K9HCZ7VQ7ZWS8R", "invalid witness version"],
    ["bc1pw5dgrnzv", "invalid program length"],
    ["bc1p0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7v8n0nx0muaewav253zgeav", "41-byte program"],
    ["bc1p0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7v07qwwzcrf", "more than 4 bits of padding"],
    ["BC1SW50QA3JX3S", "valid under BIP-173 only: bech32 for v16"],
    ["bc1zw508d6qejxtdg4y5r3zarvaryvg6kdaj", "valid under BIP-173 only: bech32 for v2"],
    ["bc1pw508d6qejxtdg4y5r3zarvary0c5xw7kw508d6qejxtdg4y5r3zarvary0c5xw7k7grplx", "bech32 for v1"],
    ["1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNb", "genesis address with its last character changed"],
    ["1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfN", "genesis address truncated"],
    ["1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNa ", "trailing space"],
    ["LVg2kJoFNg45Nbpy53h7Fe1wKyeXVRhMH9", "Litecoin address"],
    ["ltc1qxtm55gultqzhqzl2p3ks50hg2478y3hehuj6dz", "Litecoin segwit address"],
    ["", "empty"]
  ]

  it.each(valid)("accepts BIP-173/BIP-350 vector %s", (address) => {
    expect(Bitcoin.isValidAddress(address)).toBe(true)
  })

  it.each(invalid)("refuses %s (%s)", (address) => {
    expect(Bitcoin.isValidAddress(address)).toBe(false)
  })

  it("accepts base58check P2PKH and P2SH addresses", () => {
    expect(Bitcoin.isValidAddress("1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNa")).toBe(true)
    expect(Bitcoin.isValidAddress("1BoatSLRHtKNngkdXEeobR76b53LETtpyT")).toBe(true)
    expect(Bitcoin.isValidAddress("3J98t1WpEZ73CNmQviecrnyiWrnqRhWNLy")).toBe(true)
  })

  it("refuses a base58check string with another version byte", () => {
    // Litecoin's L and M prefixes are valid base58check with versions 0x30 and 0x32.
    expect(Bitcoin.isValidAddress("LUd28DgwFmae8thFhaPYHGVmps4XockqfQ")).toBe(false)
    expect(Bitcoin.isValidAddress("MGEW4aba3tnrVtVhGcmoqqHaLt5ymPSLPi")).toBe(false)
  })

  it("refuses a long string before decoding it", () => {
    expect(Bitcoin.isValidAddress("1".repeat(100_000))).toBe(false)
    expect(Bitcoin.isValidAddress(`bc1${"q".repeat(100_000)}`)).toBe(false)
  })

  it("refuses a bech32 address with any one character changed (BCH code detects it)", () => {
    fc.assert(
      fc.property(seed, fc.nat(), fc.nat(31), (bytes, position, replacement) => {
        const address = Bitcoin.addressFromSeed(bytes)
        const index = 3 + (position % (address.length - 3))
        const original = address.charAt(index)
        const changed = BECH32_CHARSET.charAt(replacement)
        fc.pre(changed !== original)
        const corrupted = address.slice(0, index) + changed + address.slice(index + 1)
        expect(Bitcoin.isValidAddress(corrupted)).toBe(false)
      })
    )
  })
})

describe("Chain.Litecoin", () => {
  it.each([
    "LUd28DgwFmae8thFhaPYHGVmps4XockqfQ",
    "Lg3PX8wRWmApFCoCMAsPF5P9dPHYQHEWKW",
    "LTuoeY6RBHV3n3cfhXVVTbJbxzxnXs9ofm",
    "MGEW4aba3tnrVtVhGcmoqqHaLt5ymPSLPi",
    "3J98t1WpEZ73CNmQviecrnyiWrnqRhWNLy",
    "ltc1qxtm55gultqzhqzl2p3ks50hg2478y3hehuj6dz",
    "LTC1QXTM55GULTQZHQZL2P3KS50HG2478Y3HEHUJ6DZ"
  ])("accepts %s", (address) => {
    expect(Litecoin.isValidAddress(address)).toBe(true)
  })

  it.each([
    "LUd28DgwFmae8thFhaPYHGVmps4XockqfR",
    "1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNa",
    "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4",
    "ltc1qxtm55gultqzhqzl2p3ks50hg2478y3hehuj6dZ",
    "ltc1qxtm55gultqzhqzl2p3ks50hg2478y3hehuj6dy"
  ])("refuses %s", (address) => {
    expect(Litecoin.isValidAddress(address)).toBe(false)
  })

  it("shares the segwit rules with Bitcoin: v0 is bech32 with 20 or 32 bytes, v1+ is bech32m", () => {
    const program = (length: number) => bech32.toWords(new Uint8Array(length).fill(7))
    expect(Litecoin.isValidAddress(bech32.encode("ltc", [0, ...program(20)]))).toBe(true)
    expect(Litecoin.isValidAddress(bech32.encode("ltc", [0, ...program(32)]))).toBe(true)
    expect(Litecoin.isValidAddress(bech32.encode("ltc", [0, ...program(21)]))).toBe(false)
    expect(Litecoin.isValidAddress(bech32m.encode("ltc", [0, ...program(20)]))).toBe(false)
    expect(Litecoin.isValidAddress(bech32m.encode("ltc", [1, ...program(32)]))).toBe(true)
    expect(Litecoin.isValidAddress(bech32.encode("ltc", [1, ...program(32)]))).toBe(false)
    expect(Litecoin.isValidAddress(bech32m.encode("ltc", [16, ...program(2)]))).toBe(true)
    expect(Litecoin.isValidAddress(bech32m.encode("ltc", [16, ...program(1)]))).toBe(false)
    expect(Litecoin.isValidAddress(bech32m.encode("ltc", [17, ...program(32)]))).toBe(false)
  })

  it("refuses the other chain's segwit addresses", () => {
    const bytes = new Uint8Array([1, 2, 3])
    expect(Litecoin.isValidAddress(Bitcoin.addressFromSeed(bytes))).toBe(false)
    expect(Bitcoin.isValidAddress(Litecoin.addressFromSeed(bytes))).toBe(false)
  })
})

describe("Chain.Ethereum", () => {
  // EIP-55 (https://eips.ethereum.org/EIPS/eip-55).
  const eip55 = [
    "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
    "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359",
    "0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB",
    "0xD1220A0cf47c7B9Be7A2E6BA89F429762e7b9aDb"
  ]

  it.each(eip55)("accepts the EIP-55 vector %s and its single-case forms", (address) => {
    expect(Ethereum.isValidAddress(address)).toBe(true)
    expect(Ethereum.isValidAddress(address.toLowerCase())).toBe(true)
    expect(Ethereum.isValidAddress(`0x${address.slice(2).toUpperCase()}`)).toBe(true)
  })

  it.each(eip55)("refuses %s with any one letter's case flipped", (address) => {
    for (let i = 2; i < address.length; i++) {
      const char = address.charAt(i)
      if (!/[a-fA-F]/.test(char)) continue
      const flipped = address.slice(0, i) + flipCase(char) + address.slice(i + 1)
      expect(Ethereum.isValidAddress(flipped), flipped).toBe(false)
    }
  })

  it.each([
    ["0X5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed", "upper-case prefix"],
    ["5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed", "no prefix"],
    ["0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAe", "39 digits"],
    ["0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAedd", "41 digits"],
    ["0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaeg", "not hex"],
    [" 0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed", "leading space"]
  ])("refuses %s (%s)", (address) => {
    expect(Ethereum.isValidAddress(address)).toBe(false)
  })
})

describe("Chain.Solana", () => {
  it("accepts base58 strings that decode to 32 bytes", () => {
    expect(Solana.isValidAddress("11111111111111111111111111111111")).toBe(true)
    expect(Solana.isValidAddress("TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA")).toBe(true)
  })

  it.each([
    ["1111111111111111111111111111111", "31 bytes"],
    ["111111111111111111111111111111111", "33 bytes"],
    ["0000000000000000000000000000000000000000000", "0 is not base58"],
    ["TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5Dl", "l is not base58"],
    ["", "empty"]
  ])("refuses %s (%s)", (address) => {
    expect(Solana.isValidAddress(address)).toBe(false)
  })
})

describe("Chain.addressFromSeed", () => {
  const chains: ReadonlyArray<Chain> = [Bitcoin, Litecoin, Ethereum, Solana]

  it.each(chains.map((chain) => [chain.chainType, chain] as const))(
    "%s: always yields a valid address of its chain, deterministically",
    (_, chain) => {
      fc.assert(
        fc.property(seed, (bytes) => {
          const address = chain.addressFromSeed(bytes)
          expect(chain.isValidAddress(address)).toBe(true)
          expect(chain.addressFromSeed(bytes)).toBe(address)
        })
      )
    }
  )

  it("yields the documented shapes", () => {
    const bytes = new Uint8Array([0])
    expect(Bitcoin.addressFromSeed(bytes)).toMatch(/^bc1q[02-9ac-hj-np-z]{38}$/)
    expect(Litecoin.addressFromSeed(bytes)).toMatch(/^ltc1q[02-9ac-hj-np-z]{38}$/)
    expect(Ethereum.addressFromSeed(bytes)).toMatch(/^0x[0-9a-fA-F]{40}$/)
  })

  it("the derived Ethereum address carries its EIP-55 checksum", () => {
    fc.assert(
      fc.property(seed, fc.nat(39), (bytes, position) => {
        const address = Ethereum.addressFromSeed(bytes)
        const index = 2 + position
        const char = address.charAt(index)
        fc.pre(/[a-fA-F]/.test(char))
        const flipped = address.slice(0, index) + flipCase(char) + address.slice(index + 1)
        const body = flipped.slice(2)
        fc.pre(body !== body.toLowerCase() && body !== body.toUpperCase())
        expect(Ethereum.isValidAddress(flipped)).toBe(false)
      })
    )
  })
})

describe("Chain.spellingsOf (one address, however it is written)", () => {
  // addressFromSeed gives segwit addresses on Bitcoin and Litecoin: like Ethereum's, their case is not significant.
  // Base58 is: another case is another address (or none), so Solana's address has one spelling.
  const chains: ReadonlyArray<readonly [string, Chain, boolean]> = [
    ["BITCOIN", Bitcoin, true],
    ["LITECOIN", Litecoin, true],
    ["ETHEREUM", Ethereum, true],
    ["SOLANA", Solana, false]
  ]

  it.each(chains)("%s: every spelling is valid, includes the address, and names the same set", (_, chain, caseFree) => {
    fc.assert(
      fc.property(seed, (bytes) => {
        const address = chain.addressFromSeed(bytes)
        const spellings = chain.spellingsOf(address)
        expect(spellings).toContain(address)
        for (const spelling of spellings) {
          expect(chain.isValidAddress(spelling)).toBe(true)
          expect([...chain.spellingsOf(spelling)].sort()).toEqual([...spellings].sort())
        }
        if (!caseFree) {
          expect(spellings).toEqual([address])
          return
        }
        const prefix = address.startsWith("0x") ? "0x" : ""
        const body = address.slice(prefix.length)
        expect(spellings).toContain(prefix + body.toLowerCase())
        expect(spellings).toContain(prefix + body.toUpperCase())
      })
    )
  })

  it("bech32 in both cases, base58 as written, Ethereum in lower, upper and EIP-55 case", () => {
    expect([...Bitcoin.spellingsOf("BC1QW508D6QEJXTDG4Y5R3ZARVARY0C5XW7KV8F3T4")].sort()).toEqual(
      ["BC1QW508D6QEJXTDG4Y5R3ZARVARY0C5XW7KV8F3T4", "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4"]
    )
    expect(Bitcoin.spellingsOf("1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2")).toEqual(["1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2"])
    expect([...Ethereum.spellingsOf("0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed")].sort()).toEqual([
      "0x5AAEB6053F3E94C9B9A09F33669435E7EF1BEAED",
      "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
      "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed"
    ])
    expect(Solana.spellingsOf("4Nd1mBQtrMJVYVfKf2PJy9NZUZdTAsp7D4xWLs4gDB4T")).toEqual(["4Nd1mBQtrMJVYVfKf2PJy9NZUZdTAsp7D4xWLs4gDB4T"])
  })
})
