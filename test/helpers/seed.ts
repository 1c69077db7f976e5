// Random properties take a new seed every run and fast-check prints it with a counterexample;
// GATEHOUSE_TEST_SEED=<seed> runs every property of the files given with that seed, to replay it.
import fc from 'fast-check';

const seed = process.env.GATEHOUSE_TEST_SEED;
if (seed !== undefined && seed !== '') fc.configureGlobal({ seed: Number(seed) });
