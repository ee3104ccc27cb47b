package pacer

// setRateLocked sets p's rate to r, as a cut would.
func (p *Pacer) setRateLocked(r float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.setRate(r, p.burstAt(r))
}
