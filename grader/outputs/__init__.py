"""Everything a batch writes under OUT: reports, summary and exports, gradebook, class page."""
