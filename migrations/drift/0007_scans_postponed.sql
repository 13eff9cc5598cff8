-- A scan that could not be requested because a peer (the coordinator) was briefly away ends
-- 'postponed': no verdict, its slot freed, the resource due again at the next tick.
ALTER TABLE scans DROP CONSTRAINT scans_status_check;
ALTER TABLE scans ADD CONSTRAINT scans_status_check
    CHECK (status IN ('claimed', 'requested', 'succeeded', 'failed', 'discarded', 'expired',
                      'postponed'));
