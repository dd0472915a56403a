// Every activity the tilebreaker worker registers.
export { probeEndpoint } from './probe';
