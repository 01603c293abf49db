SELECT count(*) FROM wharf.action_live l JOIN wharf.action_ended e ON e.id = l.id
