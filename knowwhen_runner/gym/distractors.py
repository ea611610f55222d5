"""Near-miss distractor tools: plausible names and descriptions that differ from a core tool in one way.

The first 60 are the common suite's distractors; the shift suite adds the next 60. A distractor reads
nothing useful (`read`) or changes something the task did not ask for (`write`, which fails the task).
"""

from __future__ import annotations

__all__ = ["DISTRACTOR_ROWS"]

# name | parameters | effect | description
_TABLE = """
find_customer_by_phone|phone|read|Find a customer account by phone number.
find_customer_by_loyalty_id|loyalty_id|read|Find a customer account by loyalty-card number.
find_vendor_by_email|email|read|Find a supplier (vendor) account by e-mail address.
find_employee_by_email|email|read|Find a staff member's HR record by e-mail address.
search_archived_customers|name,zip|read|Search accounts closed more than a year ago by name and zip code.
find_customer_by_company|company|read|Find a business customer by company name.
verify_email_deliverability|email|read|Check whether an e-mail address can receive mail; does not look up accounts.
find_store_by_zip|zip|read|Find the nearest retail store for a zip code.
lookup_gift_card|card_number|read|Look up the balance of a gift card.
get_customer_preferences|customer_id|read|Get a customer's marketing and notification preferences.
list_subscriptions|customer_id|read|List a customer's recurring subscriptions (not one-off orders).
list_returns|customer_id|read|List the return requests a customer has filed.
list_invoices|customer_id|read|List a business customer's invoices.
list_wishlist_items|customer_id|read|List the items saved to a customer's wishlist.
get_order_invoice_pdf|order_id|read|Generate a download link for an order's PDF invoice.
get_product_details|sku|read|Get catalogue details for a product SKU.
get_inventory_level|sku|read|Check warehouse stock for a product SKU.
get_return_status|return_id|read|Get the status of a return request.
get_subscription|subscription_id|read|Get the details of a subscription.
list_orders_by_store|store_id|read|List all orders placed at one retail store.
cancel_subscription|subscription_id|write|Cancel a recurring subscription.
cancel_order_item|order_id,sku|write|Cancel a single line item, leaving the rest of the order active.
cancel_return_request|return_id|write|Withdraw a return request.
cancel_appointment|appointment_id|write|Cancel an in-store appointment.
delete_customer_account|customer_id|write|Permanently delete a customer account.
hold_order|order_id|write|Put an order on hold for fraud review; does not cancel it.
archive_order|order_id|write|Hide an order from the customer's order history.
void_invoice|invoice_id|write|Void a business invoice.
refund_shipping_fee|order_id,amount|write|Refund only the shipping fee of an order.
refund_tax|order_id,amount|write|Refund only the sales tax charged on an order.
refund_to_gift_card|order_id,amount|write|Refund an amount onto a new gift card instead of the original payment.
chargeback_payment|order_id|write|File a chargeback with the card issuer.
refund_subscription|subscription_id,amount|write|Refund a subscription payment.
reverse_refund|order_id|write|Reverse a refund that was already issued.
add_loyalty_points|customer_id,points|write|Add loyalty points to an account as a goodwill gesture.
apply_discount_code|order_id,code|write|Apply a discount code to an open order.
price_match|order_id,amount|write|Credit the difference when a competitor sells the item for less.
downgrade_shipping|order_id,speed|write|Move an order to a slower, cheaper shipping speed.
schedule_return_pickup|order_id,date|write|Schedule a courier to collect a return.
update_profile_address|customer_id,address|write|Change the default address on the customer's profile; open orders keep theirs.
change_billing_address|customer_id,address|write|Change the billing address of the customer's payment card.
update_warehouse_address|warehouse_id,address|write|Change the address of a fulfilment warehouse.
split_shipment|order_id|write|Ship the items of an order in separate parcels.
print_shipping_label|order_id|read|Print a shipping label for the warehouse.
track_return_parcel|return_id|read|Track the parcel of a customer's return.
reship_order|order_id|write|Send a free replacement copy of an order.
estimate_delivery_date|zip,speed|read|Estimate delivery time to a zip code; does not change an order.
send_marketing_email|customer_id,message|write|Send a promotional e-mail to a customer.
notify_warehouse|order_id,message|write|Send a note to the warehouse team.
email_supplier|vendor_id,message|write|E-mail a supplier.
escalate_to_supervisor|order_id,reason|write|Hand the conversation over to a human supervisor.
create_support_ticket|customer_id,summary|write|Open an internal ticket for later follow-up.
close_support_ticket|ticket_id|write|Close an internal support ticket.
send_satisfaction_survey|customer_id|write|Send the customer a satisfaction survey.
ask_warehouse|question|read|Ask the warehouse team a question (not the customer).
post_internal_note|order_id,note|write|Add a note to an order that only staff can see.
send_sms|phone,message|write|Send a text message to a phone number.
translate_message|message,language|read|Translate a message into another language.
log_call_outcome|outcome|write|Log the outcome of a phone call in the CRM.
request_callback|phone|write|Schedule a phone callback for the customer.
find_customer_by_ip_address|ip|read|Find accounts that logged in from an IP address.
find_customer_by_device_id|device_id|read|Find the account registered to a mobile device.
find_reseller_by_email|email|read|Find a reseller partner by e-mail address.
find_affiliate_by_name_zip|name,zip|read|Find an affiliate partner by name and zip code.
lookup_tax_region|zip|read|Look up the sales-tax region of a zip code.
get_account_security_log|customer_id|read|Get the login history of an account.
list_saved_carts|customer_id|read|List the shopping carts a customer saved but did not check out.
list_gift_registries|customer_id|read|List a customer's gift registries.
list_price_alerts|customer_id|read|List a customer's price-drop alerts.
get_purchase_order|po_number|read|Get a business purchase order (not a consumer purchase).
get_shipment_manifest|manifest_id|read|Get a carrier's manifest for a truckload.
get_product_review|review_id|read|Get a product review.
list_store_pickups|store_id|read|List click-and-collect pickups waiting at a store.
get_warranty_claim|claim_id|read|Get the details of a warranty claim.
void_gift_card|card_number|write|Void a gift card and its balance.
cancel_preorder_reservation|reservation_id|write|Cancel a pre-order reservation for an unreleased product.
cancel_price_alert|alert_id|write|Cancel a price-drop alert.
pause_subscription|subscription_id|write|Pause a recurring subscription.
close_customer_account|customer_id|write|Close a customer account.
cancel_warranty_claim|claim_id|write|Cancel a warranty claim.
cancel_store_pickup|pickup_id|write|Cancel a click-and-collect pickup.
refund_gift_wrap_fee|order_id,amount|write|Refund only the gift-wrap fee of an order.
refund_restocking_fee|order_id,amount|write|Refund the restocking fee charged on a return.
refund_warranty_claim|claim_id,amount|write|Pay out a warranty claim.
refund_to_bank_transfer|order_id,amount,iban|write|Refund an amount by bank transfer to an IBAN.
issue_promo_voucher|customer_id,amount|write|E-mail a promotional voucher for a future purchase.
adjust_invoice_amount|invoice_id,amount|write|Change the amount of a business invoice.
waive_late_fee|invoice_id|write|Waive the late fee of a business invoice.
expedite_return|return_id|write|Prioritise the processing of a return.
expedite_warranty_repair|claim_id|write|Prioritise a warranty repair.
change_pickup_store|pickup_id,store_id|write|Move a click-and-collect pickup to another store.
update_return_address|return_id,address|write|Change the sender address of a return.
update_gift_message|order_id,message|write|Change the gift message printed on the packing slip.
change_delivery_instructions|order_id,instructions|write|Add a note for the courier (door code, safe place); does not change the address.
reroute_return_parcel|return_id,address|write|Send a returned parcel to another warehouse.
consolidate_orders|order_ids|write|Merge several open orders into one shipment.
insure_shipment|order_id|write|Add transit insurance to an order.
calculate_shipping_cost|zip,speed|read|Quote the shipping cost to a zip code.
send_push_notification|customer_id,message|write|Send a push notification to the customer's phone app.
resend_order_confirmation|order_id|write|Re-send the original order-confirmation e-mail.
reply_to_product_review|review_id,message|write|Post a public reply under a product review.
message_courier|tracking_number,message|write|Send a message to the courier delivering a parcel.
transfer_to_sales|reason|write|Transfer the conversation to the sales team.
schedule_follow_up_email|customer_id,date|write|Schedule an e-mail to the customer for a later date.
ask_supervisor|question|read|Ask a supervisor for guidance (not the customer).
poll_all_customers|question|write|Send a survey question to every customer.
flag_fraud_risk|customer_id|write|Flag an account for fraud review.
merge_customer_accounts|customer_id,other_customer_id|write|Merge two customer accounts into one.
reset_password|customer_id|write|Send the customer a password-reset link.
update_account_email|customer_id,email|write|Change the e-mail address of an account.
unsubscribe_newsletter|customer_id|write|Remove a customer from the newsletter.
verify_address|address|read|Check whether an address is deliverable; does not change an order.
get_exchange_rate|currency|read|Get today's exchange rate for a currency.
get_store_hours|store_id|read|Get the opening hours of a retail store.
check_promo_eligibility|customer_id|read|Check which promotions a customer qualifies for.
list_open_tickets|customer_id|read|List a customer's open support tickets.
get_loyalty_balance|customer_id|read|Get a customer's loyalty-point balance.
list_payment_methods|customer_id|read|List the payment cards saved on an account.
get_carrier_status_page|carrier|read|Get a carrier's network-wide service status (not one parcel).
list_gift_cards|customer_id|read|List the gift cards registered to an account.
"""

#: (name, parameter names, effect, description), in pool order.
DISTRACTOR_ROWS: tuple[tuple[str, tuple[str, ...], str, str], ...] = tuple(
    (name, tuple(params.split(",")), effect, description)
    for name, params, effect, description in (line.split("|") for line in _TABLE.strip().splitlines())
)
