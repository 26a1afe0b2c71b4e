package main

import (
	"math"
	"strconv"
)

// Deterministic data, reproducing crates/lab-core/src/data.rs.

const (
	ledgerAccounts       = 500
	ledgerSeedBlocks     = 1_000
	transactionsPerBlock = 4
	payloadLen           = 100
	jobPayloadLen        = 100
)

// Param is a bound parameter: int64, string or []byte (never nil: an empty blob stays a zero-length blob).
type Param = any

// Statement is one statement with its parameters, numbered ?1, ?2, … in order.
type Statement struct {
	SQL    string
	Params []Param
}

// NewItem is a row for the insert workload.
type NewItem struct {
	Name    string
	Value   int64
	Payload string
}

// RandomItem is `NewItem::random`.
func RandomItem(rng *Rng) NewItem {
	name := "item-" + rng.Text(12)
	value := rng.Between(0, 1_000_000)
	payload := rng.Text(payloadLen)
	return NewItem{Name: name, Value: value, Payload: payload}
}

// itemSeed is `item_seed`: ids 1..=rows.
func itemSeed(rows, seed uint64, yield func(Statement) error) error {
	rng := DeriveRng(seed, math.MaxUint64)
	for id := int64(1); id <= int64(rows); id++ {
		value := rng.Between(0, 1_000_000)
		payload := rng.Text(payloadLen)
		if err := yield(Statement{seedItem, []Param{id, "item-" + strconv.FormatInt(id, 10), value, payload}}); err != nil {
			return err
		}
	}
	return nil
}

// jobSeed is `job_seed`: the backlog, ids 1..=rows, all unclaimed.
func jobSeed(rows, seed uint64, yield func(Statement) error) error {
	rng := DeriveRng(seed, math.MaxUint64-1)
	for id := int64(1); id <= int64(rows); id++ {
		if err := yield(Statement{seedJob, []Param{id, rng.Text(jobPayloadLen), id}}); err != nil {
			return err
		}
	}
	return nil
}

// Block is one ledger block: the statements that append it, in order, to run in one transaction.
type Block struct {
	Idx        int64
	Statements []Statement
}

// LedgerGenerator is `LedgerGenerator`: consecutive blocks for one database.
type LedgerGenerator struct {
	rng        *Rng
	nextIdx    int64
	parentHash []byte
}

// ledgerSeeding is `LedgerGenerator::seeding`.
func ledgerSeeding(seed uint64, db int) *LedgerGenerator {
	return &LedgerGenerator{rng: DeriveRng(seed, 1_000_000+uint64(db)), nextIdx: 0}
}

// ledgerWriting is `LedgerGenerator::writing`.
func ledgerWriting(seed uint64, db int) *LedgerGenerator {
	return &LedgerGenerator{rng: DeriveRng(seed, 2_000_000+uint64(db)), nextIdx: ledgerSeedBlocks}
}

// NextBlock is `LedgerGenerator::next_block`.
func (g *LedgerGenerator) NextBlock() Block {
	idx := g.nextIdx
	g.nextIdx++
	hash := g.rng.Bytes(32)
	parent := []byte{}
	if g.parentHash != nil {
		parent = g.parentHash
	}
	g.parentHash = hash
	statements := make([]Statement, 0, 1+3*transactionsPerBlock)
	statements = append(statements, Statement{insertBlock, []Param{idx, hash, parent, int64(1_700_000_000_000) + idx*1_000}})
	for tx := int64(0); tx < transactionsPerBlock; tx++ {
		from := g.rng.Between(1, ledgerAccounts)
		to := g.rng.Between(1, ledgerAccounts)
		amount := g.rng.Between(1, 1_000_000)
		memo := "memo-" + g.rng.Text(8)
		statements = append(statements, Statement{insertTransaction, []Param{idx, tx, from, to, amount, memo}})
		for _, account := range [2]int64{from, to} {
			statements = append(statements, Statement{upsertBalance, []Param{account, idx, g.rng.Between(0, 1_000_000_000)}})
		}
	}
	return Block{Idx: idx, Statements: statements}
}

// ledgerSeed is `ledger_seed`: the blocks seeded into database `db`.
func ledgerSeed(seed uint64, db int, yield func(Statement) error) error {
	g := ledgerSeeding(seed, db)
	for i := 0; i < ledgerSeedBlocks; i++ {
		for _, s := range g.NextBlock().Statements {
			if err := yield(s); err != nil {
				return err
			}
		}
	}
	return nil
}
