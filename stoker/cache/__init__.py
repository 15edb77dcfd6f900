"""Cache planning, the providers' exact cache accounting, records, pricing and explanations."""
